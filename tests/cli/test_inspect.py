"""``beamtrove inspect`` over the output of a real fineweb run, real JSONL reviews and a Parquet copy of them."""

from __future__ import annotations

import gzip
import json
import os
import pty
import shutil
import subprocess
import sys
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beamtrove.cli import main
from beamtrove.layout import READ
from tests.conftest import make_warc_set, require


@pytest.fixture(scope="module")
def run_output(data_dir, tmp_path_factory):
    """A fineweb run over 60 real pages and 4 faults in 2 WARC files: documents, excluded/, dead_letters/."""
    warcs = tmp_path_factory.mktemp("inspect-warcs")
    make_warc_set(warcs, "--records", "60", "--files", "2", "--faults", "--seed", "7")
    output = tmp_path_factory.mktemp("inspect-run") / "out"
    status = main(
        [
            "run",
            "fineweb",
            "--input",
            f"{warcs}/*.warc.gz",
            "--output",
            str(output),
            "--lid_model",
            str(require(data_dir / "models" / "lid176" / "lid.176.ftz")),
            "--url_blocklist",
            str(require(data_dir / "blocklists" / "ut1")),
            "--extractor",
            "resiliparse",
        ]
    )
    assert status == 0
    return output


def rows(path) -> list[dict]:
    """The JSON rows of a written file, read apart from beamtrove."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def inspect(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(["inspect", *map(str, argv)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def blocks(out: str) -> list[list[str]]:
    """The listing's documents, each as its lines."""
    return [block.splitlines() for block in out.split("\n\n") if block.startswith("[")]


def snippet(text: str) -> str:
    """The text as the listing abbreviates it: newlines (and the blanks around them) as one ⏎, 300 characters."""
    compact = " ⏎ ".join(line.strip() for line in text.strip().splitlines() if line.strip())
    return compact if len(compact) <= 300 else compact[:299] + "…"


def test_a_runs_documents_piped_are_plain_lines_in_file_order(run_output, capsys):
    (kept_file,) = (run_output / "documents").iterdir()
    kept = rows(kept_file)
    status, out, err = inspect(capsys, run_output, "--limit", 2)
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"{run_output}/documents: 1 file, {kept_file.stat().st_size / 1e3:,.1f} kB"
    first = kept[0]
    metadata = first["metadata"]
    assert blocks(out)[0] == [
        f"[1] {first['id']}",
        f"    url       {metadata['url']}",
        f"    metadata  language=en · language_score={metadata['language_score']:.4g} · date={metadata['date']}",
        f"    source    {metadata['file_path']} offset {metadata['offset']}",
        f"    text      {len(first['text']):,} chars: {snippet(first['text'])}",
    ]
    assert [block[0] for block in blocks(out)] == ["[1] " + kept[0]["id"], "[2] " + kept[1]["id"]]
    assert lines[-1] == "2 shown (--limit 2); the next ones: --skip 2"


def test_skip_and_limit_page_through_all_documents(run_output, capsys):
    ids = [row["id"] for row in rows(next((run_output / "documents").iterdir()))]
    _, out, _ = inspect(capsys, run_output, "--skip", 3, "--limit", 4)
    assert [block[0] for block in blocks(out)] == [f"[{n + 1}] {ids[n]}" for n in range(3, 7)]
    _, out, _ = inspect(capsys, run_output, "--limit", 0)
    assert len(blocks(out)) == len(ids)
    assert out.splitlines()[-1] == f"{len(ids)} shown, all there are"


def test_excluded_lists_every_step_in_funnel_order_with_its_counts(run_output, capsys):
    stats = json.loads((run_output / "stats.json").read_text())
    steps = sorted((path.name for path in (run_output / "excluded").iterdir()), key=stats["funnel"].index)
    excluded = [(step, row) for step in steps for row in rows(next((run_output / "excluded" / step).iterdir()))]
    status, out, _ = inspect(capsys, run_output, "--excluded", "--limit", 0)
    assert status == 0
    header = out.split("\n\n")[0].splitlines()
    for step, line in zip(steps, header[1:], strict=True):
        counters = stats["steps"][step]["counters"]
        dropped = ", ".join(f"{name[8:]} {count:,}" for name, count in sorted(counters.items()) if "dropped." in name)
        assert line == f"  {step}: {dropped}"
    shown = blocks(out)
    assert [block[0] for block in shown] == [f"[{n}] {row['id']}" for n, (_, row) in enumerate(excluded, 1)]
    assert [block[2] for block in shown] == [
        f"    excluded  {step}: {row['metadata']['filter_reason']}" for step, row in excluded
    ]


def test_excluded_step_and_reason_prefix_select_those_documents(run_output, capsys):
    step = "gopher_quality"
    dropped = rows(next((run_output / "excluded" / step).iterdir()))
    _, out, _ = inspect(capsys, run_output, "--excluded", step, "--limit", 0)
    assert [block[0].split(" ", 1)[1] for block in blocks(out)] == [row["id"] for row in dropped]
    everything = [row for folder in sorted((run_output / "excluded").iterdir()) for row in rows(next(folder.iterdir()))]
    language = {row["id"] for row in everything if row["metadata"]["filter_reason"].startswith("lang")}
    assert language
    # --reason alone reads what every step excluded.
    _, out, _ = inspect(capsys, run_output, "--reason", "lang", "--limit", 0)
    assert {block[0].split(" ", 1)[1] for block in blocks(out)} == language
    assert out.splitlines()[-1] == f"{len(language)} shown, all that match --reason lang"
    _, out, _ = inspect(capsys, run_output, "--reason", "no_such_reason")
    assert blocks(out) == [] and out.splitlines()[-1] == "nothing matches --reason no_such_reason"


def test_an_unknown_step_names_the_steps_present(run_output, capsys):
    present = ", ".join(sorted(path.name for path in (run_output / "excluded").iterdir()))
    status, out, err = inspect(capsys, run_output, "--excluded", "gopher_qualty")
    assert (status, out) == (2, "")
    assert err == (
        f"beamtrove: error: {run_output}/excluded holds nothing excluded by a step 'gopher_qualty' "
        f"(did you mean 'gopher_quality'?); the steps that excluded documents are {present}\n"
    )
    # c4_quality ran and dropped nothing, so wrote no folder.
    _, _, err = inspect(capsys, run_output, "--excluded", "c4_quality")
    assert "step 'c4_quality' (it excluded no document)" in err


def test_dead_letters_show_reason_step_source_and_offset(run_output, capsys):
    letters = rows(next((run_output / "dead_letters").iterdir()))
    assert {letter["reason"] for letter in letters} == {"undecodable", "truncated_record"}
    _, out, _ = inspect(capsys, run_output, "--dead-letters")
    for number, (letter, block) in enumerate(zip(letters, blocks(out), strict=True), start=1):
        assert block[:4] == [
            f"[{number}] {letter['reason']} (step {letter['step']})",
            f"    message   {letter['message']}",
            f"    source    {letter['file']} offset {letter['offset']}",
            f"    record_id {letter['record_id']}",
        ]
    assert f"  {READ}: truncated_record 1, undecodable 1" in out.splitlines()
    _, out, _ = inspect(capsys, run_output, "--dead-letters", "--reason", "trunc", "--json")
    assert [json.loads(line) for line in out.splitlines()] == [
        letter for letter in letters if letter["reason"] == "truncated_record"
    ]


def test_json_id_grep_full_and_fields(run_output, capsys):
    kept = rows(next((run_output / "documents").iterdir()))
    _, out, _ = inspect(capsys, run_output, "--json", "--limit", 3)
    assert [json.loads(line) for line in out.splitlines()] == kept[:3]
    chosen = kept[5]
    _, out, _ = inspect(capsys, run_output, "--id", chosen["id"], "--full", "--fields", "http_status,charset")
    (block,) = blocks(out)
    assert block[2] == f"    metadata  http_status={chosen['metadata']['http_status']} · charset=utf-8"
    assert block[4] == f"    text      {len(chosen['text']):,} chars:"
    assert "\n".join(line[6:] for line in block[5:]) == chosen["text"]
    word = "University"
    matching = [row["id"] for row in kept if word in row["text"]]
    assert matching
    _, out, _ = inspect(capsys, run_output, "--grep", word, "--limit", 0)
    assert [block[0].split(" ", 1)[1] for block in blocks(out)] == matching


def test_a_run_that_writes_its_documents_into_its_folder_shows_them_without_what_it_set_aside(
    review_jsonl, tmp_path, capsys
):
    output = tmp_path / "converted"
    assert main(["run", "convert", "--input", str(review_jsonl / "reviews-1.jsonl"), "--output", str(output)]) == 0
    (part,) = output.glob("part-*.jsonl.gz")
    status, out, err = inspect(capsys, output, "--limit", 0, "--json")
    assert (status, err) == (0, "")
    # Its dead letter (the malformed row) is not a document.
    assert [json.loads(line) for line in out.splitlines()] == rows(part) and len(rows(part)) == 200
    _, out, _ = inspect(capsys, output, "--dead-letters")
    assert blocks(out)[0][0] == f"[1] malformed_json (step {READ})"


def test_unreadable_lines_are_shown_in_place_and_reading_goes_on(review_jsonl, capsys):
    status, out, err = inspect(capsys, review_jsonl / "reviews-1.jsonl", "--skip", 117, "--limit", 3)
    assert (status, err) == (0, "")
    listing = out.splitlines()
    unreadable = [line for line in listing if line.startswith("[unreadable]")]
    assert unreadable == [
        f"[unreadable] {review_jsonl}/reviews-1.jsonl line 121: malformed_json: "
        "unexpected control character in string: line 1 column 28 (char 27)"
    ]
    assert [block[0] for block in blocks(out)] == [
        "[118] reviews-1.jsonl/119",
        unreadable[0],
        "[119] reviews-1.jsonl/121",
        "[120] reviews-1.jsonl/122",
    ]
    # Beside JSON output the notice goes to stderr, leaving stdout parseable.
    _, out, err = inspect(capsys, review_jsonl / "reviews-1.jsonl", "--skip", 117, "--limit", 3, "--json")
    assert [json.loads(line)["id"] for line in out.splitlines()] == [f"reviews-1.jsonl/{n}" for n in (119, 121, 122)]
    assert err == unreadable[0] + "\n"


def test_a_truncated_gzip_file_shows_what_it_holds_then_says_where_it_ends(review_jsonl, tmp_path, capsys):
    texts = [row["text"] for name in ("reviews-0.jsonl", "reviews-2.jsonl") for row in rows(review_jsonl / name)]
    whole = gzip.compress("".join(json.dumps({"text": text}) + "\n" for text in texts).encode())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole[: len(whole) * 3 // 4])
    status, out, err = inspect(capsys, cut, "--limit", 0, "--json")
    assert status == 0
    shown = [json.loads(line)["text"] for line in out.splitlines()]
    # Every whole line the cut bytes still inflate to is shown; the cut one and any after it are the damage.
    readable = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(cut.read_bytes())
    assert 0 < len(shown) < len(texts) and shown == texts[: readable.count(b"\n")]
    whole_lines = readable.rindex(b"\n") + 1
    assert err == (
        f"[unreadable] {cut} offset {cut.stat().st_size} line {len(shown) + 1}: truncated: the gzip data ends at "
        f"byte {cut.stat().st_size}, before its end marker (a copy that was cut short?); line {len(shown) + 1}, at "
        f"byte {whole_lines} of the lines, and any after it are lost\n"
    )
    _, out, _ = inspect(capsys, cut, "--skip", len(shown) - 1)
    assert blocks(out)[-1] == [err.strip()]
    assert out.splitlines()[-1] == "1 shown, all there are"


def test_parquet_documents_read_as_their_jsonl_originals(review_jsonl, tmp_path, capsys):
    reviews = rows(review_jsonl / "reviews-0.jsonl")
    pq.write_table(pa.Table.from_pylist(reviews[:50]), tmp_path / "reviews.parquet", row_group_size=20)
    status, out, _ = inspect(capsys, tmp_path, "--skip", 19, "--limit", 2)
    assert status == 0
    assert out.splitlines()[0] == f"{tmp_path}: 1 file, {(tmp_path / 'reviews.parquet').stat().st_size / 1e3:,.1f} kB"
    assert blocks(out) == [
        [
            f"[{n + 1}] reviews.parquet/{n}",
            f"    source    {tmp_path}/reviews.parquet",
            f"    text      {len(reviews[n]['text']):,} chars: {snippet(reviews[n]['text'])}",
        ]
        for n in (19, 20)
    ]


def test_paths_that_hold_no_documents_say_what_they_hold(run_output, data_dir, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("not documents")
    (tmp_path / "sub").mkdir()
    status, out, err = inspect(capsys, tmp_path)
    assert (status, out) == (2, "")
    assert (
        err == f"beamtrove: error: no JSONL, Parquet or CSV files under {tmp_path}: {tmp_path} holds notes.txt, sub/\n"
    )
    _, _, err = inspect(capsys, tmp_path / "missing")
    assert err == (
        f"beamtrove: error: {tmp_path}/missing does not exist: pass a run's output folder, "
        "or JSONL, Parquet or CSV files, folders or globs\n"
    )
    _, _, err = inspect(capsys, tmp_path, "--excluded")
    assert err.startswith(f"beamtrove: error: --excluded reads a run's output folder, and {tmp_path} is not one")
    _, _, err = inspect(capsys, require(data_dir / "warc" / "dolma_wget_sample-0000.warc.gz"))
    assert "WARC files hold pages rather than documents; extract their text first" in err
    dropped_only = tmp_path / "dropped-only"
    shutil.copytree(run_output / "excluded", dropped_only / "excluded")
    shutil.copy(run_output / "stats.json", dropped_only)
    _, _, err = inspect(capsys, dropped_only)
    assert err == (
        f"beamtrove: error: {dropped_only} holds no documents/: the run kept no document. It holds excluded/, "
        "stats.json; pass --excluded to see what its filters dropped, --dead-letters what it could not read\n"
    )


def test_python_m_beamtrove_inspect_piped_ends_quietly_when_the_reader_stops(review_jsonl, capsys):
    command = [sys.executable, "-m", "beamtrove", "inspect", str(review_jsonl), "--limit", "3"]
    piped = subprocess.run(command, capture_output=True, text=True, check=True)
    assert piped.stdout == inspect(capsys, review_jsonl, "--limit", 3)[1]
    # Far more than a pipe holds, of which the reader takes one line.
    everything = subprocess.Popen(
        [*command[:-2], "--full", "--limit", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert everything.stdout.readline().decode().startswith(f"{review_jsonl}: 3 files")
    everything.stdout.close()
    assert everything.wait() == 0
    assert everything.stderr.read() == b""


def test_on_a_terminal_the_listing_goes_through_the_pager(review_jsonl, tmp_path, capsys):
    paged = tmp_path / "paged.txt"
    leader, follower = pty.openpty()
    environment = {**os.environ, "PAGER": f"cat > {paged}"}
    command = [sys.executable, "-m", "beamtrove", "inspect", str(review_jsonl), "--limit", "3"]
    subprocess.run(command, stdout=follower, stderr=subprocess.PIPE, env=environment, check=True)
    os.close(follower)
    os.close(leader)
    assert paged.read_text() == inspect(capsys, review_jsonl, "--limit", 3)[1]
    # A pager quit after the first bytes ends the reading without an error.
    environment["PAGER"] = f"head -c 100 > {paged}"
    leader, follower = pty.openpty()
    quit_early = subprocess.run(
        [*command[:-2], "--full", "--limit", "0"], stdout=follower, stderr=subprocess.PIPE, env=environment, check=False
    )
    os.close(follower)
    os.close(leader)
    assert (quit_early.returncode, quit_early.stderr) == (0, b"")
    assert paged.read_text() == inspect(capsys, review_jsonl, "--limit", 3)[1][:100]
