"""recsys data: MovieLens/CSV loaders on generated files and archives, bad input, and the per-user 4:1 split."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import torch

from contrastlab import ConfigError, DataMissingError
from contrastlab.plugins.recsys.data import generate_synthetic, load_interactions
from contrastlab.plugins.recsys.split import split_per_user

# (user, item, rating, timestamp); user 10 rated item 7 twice (kept once), ids are not contiguous
ROWS = [(1, 7, 5, 881250949), (1, 30, 3, 891717742), (10, 7, 4, 878887116), (10, 7, 2, 880606923),
        (2, 30, 1, 886397596), (2, 99, 4, 884182806)]


def _text(sep: str, rows=ROWS) -> str:
    return "".join(sep.join(str(v) for v in row) + "\n" for row in rows)


def write_ml(tmp: Path, variant: str, text: str, *, archive: bool = False) -> Path:
    """Write ``<tmp>/<variant>/<file>`` or ``<tmp>/<variant>.zip`` as GroupLens ships them."""
    name = "u.data" if variant == "ml-100k" else "ratings.dat"
    if archive:
        with zipfile.ZipFile(tmp / f"{variant}.zip", "w") as zf:
            zf.writestr(f"{variant}/{name}", text)
            zf.writestr(f"{variant}/README", "generated for a test")
    else:
        (tmp / variant).mkdir(parents=True, exist_ok=True)
        (tmp / variant / name).write_text(text)
    return tmp


def _pairs(data) -> set[tuple[int, int]]:
    return set(zip(data.users.tolist(), data.items.tolist(), strict=True))


@pytest.mark.parametrize(("variant", "sep"), [("ml-100k", "\t"), ("ml-1m", "::")])
@pytest.mark.parametrize("archive", [False, True])
def test_movielens_folder_and_zip(tmp_path, variant, sep, archive):
    root = write_ml(tmp_path, variant, _text(sep), archive=archive)
    data = load_interactions(variant, str(root))
    # users 1, 2, 10 → 0, 1, 2 (numeric order); items 7, 30, 99 → 0, 1, 2; the repeated (10, 7) kept once
    assert (data.num_users, data.num_items, len(data)) == (3, 3, 5)
    assert _pairs(data) == {(0, 0), (0, 1), (2, 0), (1, 1), (1, 2)}
    assert data.density == pytest.approx(5 / 9)
    if archive:  # the zip itself, or the folder holding it, both work
        assert len(load_interactions(variant, str(tmp_path / f"{variant}.zip"))) == 5
    else:
        assert len(load_interactions(variant, str(tmp_path / variant))) == 5


def test_min_rating_threshold_and_csv_with_and_without_header(tmp_path):
    plain = tmp_path / "plain.csv"
    plain.write_text(_text(","))
    headed = tmp_path / "headed.csv"
    headed.write_text("userId,movieId,rating,timestamp\n" + _text(","))
    a, b = load_interactions("csv", str(plain)), load_interactions("csv", str(headed))
    assert _pairs(a) == _pairs(b) and len(a) == 5
    kept = load_interactions("csv", str(plain), min_rating=4)  # ratings >= 4: (1,7) (10,7) (2,99)
    assert len(kept) == 3 and (kept.num_users, kept.num_items) == (3, 2)
    ids = tmp_path / "ids.csv"  # text ids, two columns, no header
    ids.write_text("alice,matrix\nbob,matrix\nbob,alien\n")
    text_ids = load_interactions("csv", str(ids))
    assert (text_ids.num_users, text_ids.num_items, len(text_ids)) == (2, 2, 3)
    with pytest.raises(ConfigError, match="no rating column"):
        load_interactions("csv", str(ids), min_rating=3)
    forced = tmp_path / "forced.csv"
    forced.write_text("user,item\n1,2\n")
    assert len(load_interactions("csv", str(forced), csv_header=True)) == 1


@pytest.mark.parametrize("first", ["user_1,item_5,4", "alice,android,5", "kid7,movie9,3", "u1,i2,4"])
def test_a_first_row_whose_ids_contain_a_column_word_is_data_not_a_header(tmp_path, first):
    """Ids such as ``user_1`` or ``android`` contain a column word but name no column: the row must be kept."""
    path = tmp_path / "ids.csv"
    path.write_text(first + "\nbob,item_5,3\n")
    data = load_interactions("csv", str(path))
    assert len(data) == 2 and data.num_users == 2


@pytest.mark.parametrize(("rows", "users"), [("007,1\n7,2\n8,1\n", ["007", "7", "8"]),
                                             ("+7,1\n7,2\n", ["+7", "7"]),
                                             ("7\t1\n07\t2\n", ["07", "7"])])
def test_ids_written_differently_are_different_ids(tmp_path, rows, users):
    """``007`` and ``7`` are two ids, not the integer 7 twice: they were merged into one user."""
    path = tmp_path / "ids.csv"
    path.write_text(rows.replace("\t", ","))
    data = load_interactions("csv", str(path))
    assert data.num_users == len(users) and len(data) == len(users)
    if "\t" in rows:  # the MovieLens fast path sees the same ids
        root = write_ml(tmp_path, "ml-100k", "".join(line + "\t5\t100\n" for line in rows.splitlines()))
        assert load_interactions("ml-100k", str(root)).num_users == len(users)


def test_padded_ids_that_name_distinct_integers_keep_the_numeric_indexing(tmp_path):
    """Zero-padded ids of varying width (``02``, ``1``, ``10``) are no two ids merged: they keep the numeric order
    they had before ``007`` and ``7`` were told apart. Reading them as text reordered users and items (``02`` <
    ``1`` < ``10``), which changes the split and maps an older run's checkpoint rows to other users."""
    rows = [("02", "010"), ("1", "9"), ("10", "010"), ("1", "0011"), ("02", "9"), ("3", "0011")]
    plain = [(str(int(u)), str(int(i))) for u, i in rows]
    (tmp_path / "padded.csv").write_text("".join(f"{u},{i}\n" for u, i in rows))
    (tmp_path / "plain.csv").write_text("".join(f"{u},{i}\n" for u, i in plain))
    padded, canonical = (load_interactions("csv", str(tmp_path / f)) for f in ("padded.csv", "plain.csv"))
    assert torch.equal(padded.users, canonical.users) and torch.equal(padded.items, canonical.items)
    assert (padded.num_users, padded.num_items) == (4, 3)
    assert padded.users.tolist() == [0, 0, 1, 1, 2, 3]               # 1, 1, 02, 02, 3, 10: numeric order
    ml = write_ml(tmp_path, "ml-100k", "".join(f"{u}\t{i}\t5\t100\n" for u, i in rows))  # through the fast path's gate
    fast = load_interactions("ml-100k", str(ml))
    assert torch.equal(fast.users, canonical.users) and torch.equal(fast.items, canonical.items)


@pytest.mark.parametrize("header", ["userId,movieId,rating", "user_id,item_id", "User ID,Item ID,Rating",
                                    "uid,iid,score", "user,item,rating,timestamp"])
def test_a_header_naming_the_columns_is_detected(tmp_path, header):
    path = tmp_path / "headed.csv"
    fields = header.count(",") + 1
    path.write_text(header + "\n" + ",".join(["1", "2", "5", "100"][:fields]) + "\n")
    assert len(load_interactions("csv", str(path))) == 1


@pytest.mark.parametrize("header", ["reviewerID,asin", "member_id,anime_id", "playlist_id,track_uri",
                                    '"user","item"', "'user','item'"])
def test_a_header_of_other_id_columns_or_quoted_names_is_detected(tmp_path, header):
    """Headers the detection knew before it required a whole column name: an ``…_id``/``…ID`` column outside its
    word list (Amazon's ``reviewerID``), or names quoted as R's ``write.csv`` writes them. They were read as a
    first row of data (one made-up user and item)."""
    path = tmp_path / "headed.csv"
    path.write_text(header + "\n1,2\n3,4\n")
    data = load_interactions("csv", str(path))
    assert (len(data), data.num_users, data.num_items) == (2, 2, 2)


@pytest.mark.parametrize("first", ["ANDROID,KID,4", "squid,avid,5", "Android,android,3"])
def test_ids_ending_in_id_letters_are_data(tmp_path, first):
    path = tmp_path / "ids.csv"
    path.write_text(first + "\nbob,x,3\n")
    assert len(load_interactions("csv", str(path))) == 2


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("1\t7\t5\n", r"u\.data, line 1: expected 4 fields"),
        ("1\t7\t5\t100\n2\t7\tfive\t100\n", r"line 2: rating 'five' is not a number"),
        ("1\t7\t5\t100\n\t7\t5\t100\n", r"line 2: empty user or item id"),
        ("1\t7\t5\t100\n2\t8\t5\tlater\n", r"line 2: timestamp 'later'"),
        ("\n\n", r"no interaction rows"),
    ],
)
def test_malformed_movielens_rows_are_one_line_errors(tmp_path, content, match):
    root = write_ml(tmp_path, "ml-100k", content)
    with pytest.raises(ConfigError, match=match) as info:
        load_interactions("ml-100k", str(root))
    assert "\n" not in str(info.value)


def test_malformed_csv_and_missing_or_corrupt_files(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,5\n3\n")
    with pytest.raises(ConfigError, match=r"bad.csv, line 2: expected 2 to 4 fields"):
        load_interactions("csv", str(bad))
    mixed = tmp_path / "mixed.csv"
    mixed.write_text("1,2,5\n3,4\n")
    with pytest.raises(ConfigError, match="line 2: 3 fields on the first row"):
        load_interactions("csv", str(mixed))
    with pytest.raises(DataMissingError, match="not found"):
        load_interactions("csv", str(tmp_path / "nope.csv"))
    with pytest.raises(ConfigError, match=r"data\.root=FILE"):
        load_interactions("csv", None)
    with pytest.raises(DataMissingError, match=r"grouplens\.org.*data\.root") as info:
        load_interactions("ml-1m", str(tmp_path))
    assert "\n" not in str(info.value) and "ml-1m.zip" in str(info.value)
    assert f"ml-1m/ folder in {tmp_path} (or pass" in str(info.value)  # where to put it: the folder given
    (tmp_path / "ml-100k.zip").write_bytes(b"not a zip at all")
    with pytest.raises(DataMissingError, match="corrupt archive"):
        load_interactions("ml-100k", str(tmp_path))
    with zipfile.ZipFile(tmp_path / "ml-1m.zip", "w") as zf:
        zf.writestr("ml-1m/movies.dat", "1::Toy Story::Animation\n")
    with pytest.raises(DataMissingError, match=r"has no ratings\.dat"):
        load_interactions("ml-1m", str(tmp_path))
    with pytest.raises(ConfigError, match="no interaction has rating >= 9"):
        load_interactions("ml-100k", str(write_ml(tmp_path / "t", "ml-100k", _text("\t"))), min_rating=9)


def test_a_missing_zip_as_data_root_is_named_as_missing(tmp_path):
    """data.root may be the zip itself: a missing one is reported as such, not as a folder the zip is inside."""
    zip_path = tmp_path / "ml-100k.zip"
    with pytest.raises(DataMissingError) as info:
        load_interactions("ml-100k", str(zip_path))
    text = str(info.value)
    assert text.startswith(f"data.root={zip_path} does not exist;") and "grouplens.org" in text
    assert "ml-100k.zip/" not in text and "\n" not in text


@pytest.mark.parametrize(("name", "hint"), [("ratings.csv", "add --set data.dataset=csv"),
                                            ("notes.txt", "ml-100k.zip archive, its extracted ml-100k/ folder")])
def test_a_file_that_is_not_movielens_as_data_root_says_it_is_a_file(tmp_path, name, hint):
    """An existing file that is neither the zip nor u.data: no advice to put a folder inside it; a CSV is pointed
    at data.dataset=csv."""
    file = tmp_path / name
    file.write_text("1,2,5\n")
    with pytest.raises(DataMissingError) as info:
        load_interactions("ml-100k", str(file))
    text = str(info.value)
    assert text.startswith(f"data.root={file} is a file, but neither ml-100k.zip nor u.data;") and hint in text
    assert f"in {file}" not in text and "\n" not in text


def test_split_is_deterministic_four_to_one_per_user_without_leakage():
    data = generate_synthetic(users=60, items=30, min_per_user=5, max_per_user=20, seed=3)
    a, b = split_per_user(data, 0.2, seed=7), split_per_user(data, 0.2, seed=7)
    assert torch.equal(a.train.keys(30), b.train.keys(30)) and torch.equal(a.test.keys(30), b.test.keys(30))
    assert not torch.equal(a.test.keys(30), split_per_user(data, 0.2, seed=8).test.keys(30))
    train, test = set(a.train.keys(30).tolist()), set(a.test.keys(30).tolist())
    assert not train & test and len(train) + len(test) == len(data)  # no pair on both sides, none lost
    assert a.dropped_cold_items == 0  # 60 users on 30 items: every item has training interactions
    per_user = torch.bincount(data.users, minlength=60)
    assert torch.equal(torch.bincount(a.test.users, minlength=60), torch.round(per_user * 0.2).long())  # 4:1
    assert torch.equal(a.train.indptr[1:] - a.train.indptr[:-1], torch.bincount(a.train.users, minlength=60))
    assert torch.equal(a.train.keys(30), torch.sort(a.train.keys(30)).values)  # sorted by (user, item)


def test_cold_test_items_are_dropped():
    # item 4 belongs to user 0 only: when it lands in the test set the model has never seen it
    rows = [(0, i) for i in range(5)] + [(u, i) for u in (1, 2, 3) for i in (0, 1, 2, 3, 5, 6, 7, 8, 9, 10)]
    users, items = (torch.tensor(c) for c in zip(*rows, strict=True))
    from contrastlab.plugins.recsys.data import Interactions

    data = Interactions(users, items, 4, 11, "toy")
    for seed in range(20):
        split = split_per_user(data, 0.2, seed=seed)
        seen = set(split.train.items.tolist())
        assert set(split.test.items.tolist()) <= seen
        assert len(split.train) + len(split.test) + split.dropped_cold_items == len(rows)
    assert any(split_per_user(data, 0.2, seed=s).dropped_cold_items for s in range(20))


def test_split_edge_cases():
    one_each = generate_synthetic(users=5, items=10, min_per_user=1, max_per_user=1, seed=0)
    with pytest.raises(ConfigError, match="no test interactions"):
        split_per_user(one_each)  # a single item per user stays in training: nothing to test on
    with pytest.raises(ConfigError, match="test_fraction"):
        split_per_user(one_each, test_fraction=1.0)
    with pytest.raises(ConfigError, match="min_per_user"):
        generate_synthetic(users=5, items=10, min_per_user=11, max_per_user=12)


@pytest.mark.parametrize(("content", "match"), [
    ("user,item\n", r"only.csv: no interaction rows after its header line 'user,item'$"),
    ("1,2,abc\n", r"only.csv: no interaction rows after its header line '1,2,abc'$"),  # a text rating: a header
    ("\n\n", r"only.csv: no interaction rows found \(the file is empty\)$"),
])  # fmt: skip
def test_a_csv_of_only_a_header_says_so(tmp_path, content, match):
    """From a bad-input sweep: a CSV holding only a header line (or a first row taken for one) was reported as
    'the file is empty'."""
    path = tmp_path / "only.csv"
    path.write_text(content)
    with pytest.raises(ConfigError, match=match):
        load_interactions("csv", str(path))


def _staircase():
    """Users 0..7 hold items 0..u (1 to 8 items); users 8..15 hold the single item u − 8, so no item is cold."""
    from contrastlab.plugins.recsys.data import Interactions

    rows = [(u, i) for u in range(8) for i in range(u + 1)] + [(8 + i, i) for i in range(8)]
    users, items = (torch.tensor(c) for c in zip(*rows, strict=True))
    return Interactions(users, items, 16, 8, "staircase")


@pytest.mark.parametrize("fraction", [0.2, 0.5, 0.7, 0.9])
def test_each_user_holds_out_round_f_n_items_but_keeps_one(fraction):
    """min(round(f·n_u), n_u − 1) test items per user (Python's round, half to even), as docs/recsys.md says."""
    data = _staircase()
    split = split_per_user(data, fraction, seed=1)
    n_u = torch.bincount(data.users, minlength=16).tolist()
    want = [min(round(fraction * n), n - 1) for n in n_u]
    assert torch.bincount(split.test.users, minlength=16).tolist() == want and split.dropped_cold_items == 0
    assert torch.bincount(split.train.users, minlength=16).tolist() == [n - t for n, t in zip(n_u, want, strict=True)]


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.0, 1.5])
def test_a_test_fraction_outside_zero_one_is_refused(fraction):
    with pytest.raises(ConfigError, match=r"must be in \(0, 1\)"):
        split_per_user(_staircase(), fraction)


def test_the_split_defaults_and_its_summary_counts():
    data = _staircase()
    split = split_per_user(data)
    same = split_per_user(data, 0.2, seed=0)  # data.test_fraction and data.split_seed's defaults
    assert torch.equal(split.test.keys(8), same.test.keys(8)) and torch.equal(split.train.keys(8), same.train.keys(8))
    test_users = len(set(split.test.users.tolist()))  # users 2..7: round(0.2·n_u) >= 1 from n_u = 3
    assert test_users == 6
    assert split.summary() == {"dataset": "staircase", "users": 16, "items": 8, "train_interactions": len(split.train),
                               "test_interactions": len(split.test), "test_users": test_users,
                               "dropped_cold_items": 0}
    assert split.train_density == pytest.approx(len(split.train) / (16 * 8))


@pytest.mark.parametrize(("rows", "pairs"), [
    ("7,1\n10,2\n007,3\n", {(2, 0), (1, 1), (0, 2)}),  # 007 and 7 both present: text order 007 < 10 < 7
    ("alice,1\n", {(0, 0)}),  # a single text id
])  # fmt: skip
def test_a_column_read_as_text_is_indexed_in_text_order(tmp_path, rows, pairs):
    path = tmp_path / "text.csv"
    path.write_text(rows)
    assert _pairs(load_interactions("csv", str(path))) == pairs


def test_synthetic_settings_reach_the_generator_and_its_defaults_are_the_configs():
    from contrastlab.plugins.recsys.config import SyntheticSection

    small = {"users": 30, "items": 20, "factors": 3, "min_per_user": 2, "max_per_user": 5, "sharpness": 1.0,
             "seed": 4}
    data = load_interactions("synthetic", synthetic=small)
    assert (data.num_users, data.num_items) == (30, 20) and _pairs(data) == _pairs(generate_synthetic(**small))
    assert _pairs(generate_synthetic()) == _pairs(generate_synthetic(**SyntheticSection().model_dump()))


def test_synthetic_users_take_between_min_and_max_items_and_may_take_them_all():
    data = generate_synthetic(users=400, items=30, min_per_user=3, max_per_user=6, seed=2)
    per_user = torch.bincount(data.users, minlength=400)
    assert int(per_user.min()) == 3 and int(per_user.max()) == 6  # uniform on [3, 6]: both ends occur
    every = generate_synthetic(users=5, items=4, min_per_user=4, max_per_user=4)  # max_per_user = items is allowed
    assert len(every) == 20
    assert len(generate_synthetic(users=5, items=4, min_per_user=1, max_per_user=1)) == 5


@pytest.mark.parametrize("sharpness", [0.0, 3.0])
def test_synthetic_choices_follow_the_documented_softmax(sharpness):
    """One item per user, drawn from softmax(sharpness·⟨p_u, q_i⟩/√f + b_i) with p, q ~ N(0, I_f), b ~ N(0, ½²),
    drawn in that order from the seed (the docstring's model). Checked by the item frequencies and by the mean
    probability of the chosen item, which is E Σ_i P_ui² when the draws follow P."""
    users, items, factors, seed = 6000, 6, 4, 5
    data = generate_synthetic(users=users, items=items, factors=factors, min_per_user=1, max_per_user=1,
                              sharpness=sharpness, seed=seed)
    g = torch.Generator().manual_seed(seed)
    p, q = torch.randn(users, factors, generator=g), torch.randn(items, factors, generator=g)
    b = 0.5 * torch.randn(items, generator=g)
    prob = torch.softmax(sharpness * (p @ q.T) / factors**0.5 + b, dim=1)  # [U, I]
    assert torch.equal(data.users, torch.arange(users))
    freq = torch.bincount(data.items, minlength=items).double() / users
    torch.testing.assert_close(freq, prob.mean(0).double(), rtol=0, atol=0.02)  # std error ≤ 0.0065
    chosen = prob[data.users, data.items].mean()
    assert float(chosen) == pytest.approx(float((prob**2).sum(1).mean()), abs=0.015)


@pytest.mark.parametrize("ids", [("1", "2", "3"), ("ann", "bob", "cy")])  # numeric (fast path) and text ids
def test_three_column_csvs_keep_their_ratings_and_refuse_non_numbers(tmp_path, ids):
    a, b, c = ids
    path = tmp_path / "r.csv"
    path.write_text(f"{a},10,5\n{b},10,2\n{c},11,4\n")
    kept = load_interactions("csv", str(path), min_rating=4)  # the rating column is read: 2 of 3 rows kept
    assert len(kept) == 2 and kept.num_users == 2
    headed = tmp_path / "h.csv"
    headed.write_text(f"user,item,rating\n{a},10,5\n{b},10,2\n{c},11,4\n")
    assert len(load_interactions("csv", str(headed))) == 3  # the header line only is dropped
    for bad in ("nan", "inf", "x"):
        path.write_text(f"{a},10,5\n{b},10,{bad}\n")
        with pytest.raises(ConfigError, match=rf"line 2: rating '{bad}' is not a number"):
            load_interactions("csv", str(path))


def test_a_non_finite_movielens_timestamp_is_refused(tmp_path):
    root = write_ml(tmp_path, "ml-100k", "1\t2\t5\t881250949\n2\t2\t4\tinf\n")
    with pytest.raises(ConfigError, match=r"line 2: timestamp 'inf' is not a number"):
        load_interactions("ml-100k", str(root))


def test_clean_numeric_files_take_the_vectorised_fast_path():
    """docs/recsys.md: MovieLens is parsed by a vectorised fast path (the line parser takes ~20× longer); a clean
    numeric file, headed CSV and single row included, must not fall back to it."""
    from contrastlab.plugins.recsys.data import _parse_numeric

    def fast(text: str, sep: str, low: int, header: bool = False):
        out = _parse_numeric(text, sep, "f", min_fields=low, max_fields=4, header=header)
        assert out is not None
        return out.users.tolist(), out.items.tolist(), None if out.ratings is None else out.ratings.tolist()

    want = ([r[0] for r in ROWS], [r[1] for r in ROWS], [float(r[2]) for r in ROWS])
    assert fast(_text("\t"), "\t", 4) == fast(_text("::"), "::", 4) == want
    assert fast("userId,movieId,rating,timestamp\n" + _text(","), ",", 2, header=True) == want
    assert fast("3,4\n", ",", 2) == ([3], [4], None)
