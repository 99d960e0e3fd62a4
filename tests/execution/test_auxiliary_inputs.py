"""What a run reads besides its input (tokenizers, indexes, models, lists) never overlaps its output.

``--overwrite`` deletes what the output folder held, so a tokenizer or an
index kept there would be gone after the run that read it.
"""

from __future__ import annotations

import shutil

import pytest

from beamtrove.cli import main
from beamtrove.execution.output import check_auxiliary_inputs
from beamtrove.option_parsing import parse
from beamtrove.options import ConfigurationError, paths_read
from beamtrove.pipelines import pipeline_spec
from tests.conftest import require


def _files(folder) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def _run(pipeline: str, *args: str) -> int:
    return main(["run", pipeline, *args, "--progress_interval", "0"])


def test_a_tokenizer_inside_the_output_is_refused_before_overwrite_deletes_it(review_jsonl, data_dir, tmp_path, capsys):
    output = tmp_path / "out"
    reviews = ["--input", str(review_jsonl), "--input_format", "jsonl"]
    assert _run("convert", *reviews, "--output", str(output)) == 0
    tokenizer = output / "tokenizer.json"
    shutil.copy(require(data_dir / "tokenizers" / "gpt2" / "tokenizer.json"), tokenizer)
    before = _files(output)
    capsys.readouterr()

    assert _run("tokenize", *reviews, "--output", str(output), "--tokenizer", str(tokenizer), "--overwrite") == 2
    assert capsys.readouterr().err == (
        f"beamtrove: error: --tokenizer {tokenizer} is inside --output {output}: a run must not write where it reads, "
        "and --overwrite would delete it. Move it out of the output folder, or write to another --output.\n"
    )
    assert _files(output) == before


def test_an_index_inside_the_output_or_holding_it_is_refused(review_jsonl, tmp_path, capsys):
    output = tmp_path / "out"
    index = output / "index"
    reviews = ["--input", str(review_jsonl), "--input_format", "jsonl"]
    assert _run("dedup_index", *reviews, "--output", str(index), "--dedup", "exact,minhash") == 0
    before = _files(output)
    capsys.readouterr()

    dedup = ["dedup", *reviews, "--dedup", "exact,minhash", "--against", str(index)]
    assert _run(*dedup, "--output", str(output), "--overwrite") == 2
    assert capsys.readouterr().err.startswith(f"beamtrove: error: --against {index} is inside --output {output}: ")
    assert _run(*dedup, "--output", str(index / "deduplicated")) == 2
    assert capsys.readouterr().err == (
        f"beamtrove: error: --output {index / 'deduplicated'} is inside --against {index}: a run must not write where "
        "it reads. Write to a folder outside it.\n"
    )
    assert _files(output) == before


@pytest.mark.parametrize(
    ("pipeline", "option", "several"),
    [
        ("tokenize", "tokenizer", False),
        ("dedup", "against", True),
        ("dedup", "substring_tokenizer", False),
        ("dedup", "count_tokens", False),
        ("filter", "url_blocklist", False),
        ("filter", "lid_model", False),
        ("filter", "badwords_dir", False),
        ("filter", "decont_index", True),
        ("filter", "classifier_model", False),
        ("filter", "unigram_table", False),
        ("convert", "summary_lid_model", False),
        ("convert", "summary_tokenizer", False),
        ("convert", "input_ranges", False),
    ],
)
def test_every_path_a_run_reads_is_checked_against_the_output(tmp_path, pipeline, option, several):
    output = tmp_path / "out"
    inside = f"{tmp_path / 'elsewhere'},{output / 'kept'}" if several else str(output / "kept")
    options = parse(pipeline_spec(pipeline), [f"--{option}", inside, "--output", str(output)])
    assert (f"--{option}", str(output / "kept")) in paths_read(options, pipeline_spec(pipeline).option_classes)
    with pytest.raises(ConfigurationError, match=f"^--{option} {output / 'kept'} is inside --output {output}: "):
        check_auxiliary_inputs(paths_read(options, pipeline_spec(pipeline).option_classes), str(output))
    # Beside the output, not in it: a folder whose name merely starts like it.
    beside = parse(pipeline_spec(pipeline), [f"--{option}", f"{output}-models/kept", "--output", str(output)])
    check_auxiliary_inputs(paths_read(beside, pipeline_spec(pipeline).option_classes), str(output))
