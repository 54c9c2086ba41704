"""DeepMind Control Suite pixel environments with the gymnasium API."""
