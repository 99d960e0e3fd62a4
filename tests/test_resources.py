"""Shared models and lists: the check a worker makes that it has the file the job was built with."""

from __future__ import annotations

import fsspec
import pytest

from beamtrove.resources import MissingOnWorker, missing_on_worker, require_on_worker


def test_a_file_or_folder_the_worker_has_is_given_back(data_dir, tmp_path):
    model = data_dir / "models" / "lid176" / "lid.176.ftz"
    if not model.exists():
        pytest.skip(f"{model} is absent: ../shared/data holds the real model")
    assert require_on_worker(str(model), "The language-ID model", "--lid_model") == str(model)
    assert require_on_worker(str(tmp_path), "The URL blocklist", "--url_blocklist") == str(tmp_path)
    with fsspec.open("memory://beamtrove-test/model.bin", "wb") as remote:
        remote.write(b"weights")
    assert require_on_worker("memory://beamtrove-test/model.bin", "The model", "--model") == (
        "memory://beamtrove-test/model.bin"
    )


def test_a_missing_one_names_its_option_and_where_to_put_it(tmp_path):
    missing = tmp_path / "lists"
    with pytest.raises(MissingOnWorker) as raised:
        require_on_worker(str(missing), "The URL blocklist", "--url_blocklist")
    assert isinstance(raised.value, FileNotFoundError)
    assert str(raised.value).startswith(
        f"The URL blocklist {missing} (--url_blocklist) is not on the worker that needs it, though the machine that "
        "built the job has it"
    )
    assert "`beamtrove dataflow build-image`" in str(raised.value)


def test_a_workers_missing_file_is_found_raised_or_relayed_and_nothing_else_is():
    message = "The URL blocklist /lists (--url_blocklist) is not on the worker that needs it"
    try:
        try:
            raise MissingOnWorker(f"{message} [while running 'url_filter/ParDo(_FilterFn)']")
        except MissingOnWorker as error:
            raise RuntimeError("bundle failed") from error
    except RuntimeError as error:
        assert missing_on_worker(error) == message
    # As a runner's log relays it: line breaks escaped.
    relayed = "Traceback ...\\n  File 'resources.py'\\nbeamtrove.resources.MissingOnWorker: " + message + "\\n\\nDuring"
    assert missing_on_worker(relayed) == message
    assert missing_on_worker(RuntimeError("FileNotFoundError: /lists")) is None
    assert missing_on_worker("an unrelated worker log line") is None
