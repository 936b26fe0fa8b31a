"""What a record vouches for is checked before it is trusted: every file's size, the sha256 of small files, and
every sha256 on ``verify``."""

from __future__ import annotations

from domainbert.core.artifacts import SMALL_FILE, atomic_output, damage, is_complete, read_record


def _folder(tmp_path):
    final = tmp_path / "art"
    with atomic_output(final, config={}, fp="fp") as tmp:
        (tmp / "result.json").write_text('{"f1": 0.5}')
        (tmp / "big.bin").write_bytes(b"\0" * (SMALL_FILE + 10))
    return final


def test_the_record_holds_each_file_size(tmp_path):
    final = _folder(tmp_path)
    assert read_record(final)["sizes"] == {"big.bin": SMALL_FILE + 10, "result.json": 11}
    assert damage(final) is None and is_complete(final, "fp")


def test_an_edited_small_file_is_damage_even_at_the_same_size(tmp_path):
    final = _folder(tmp_path)
    (final / "result.json").write_text('{"f1": 0.9}')
    assert (
        damage(final)
        == f"{final / 'result.json'}: damaged: content differs from the sha256 in its record (edited or corrupt)"
    )
    assert not is_complete(final, "fp")


def test_a_truncated_big_file_is_caught_by_its_size_a_flipped_byte_on_verify(tmp_path):
    final = _folder(tmp_path)
    big = final / "big.bin"
    with open(big, "r+b") as f:
        f.write(b"\1")
    assert damage(final) is None  # a big file is not hashed on every check
    assert "big.bin: damaged: content changed" in damage(final, verify=True)
    assert not is_complete(final, "fp", verify=True)
    big.write_bytes(b"\0" * 10)
    assert damage(final) == f"{big}: damaged: 10 bytes where its record has {SMALL_FILE + 10} (truncated or edited)"
    big.unlink()
    assert damage(final) == f"{big}: damaged: missing since the folder was written"


def test_verify_everything_hashes_big_files_in_every_check(tmp_path):
    from domainbert.core.artifacts import verify_everything

    final = _folder(tmp_path)
    with open(final / "big.bin", "r+b") as f:
        f.write(b"\1")
    assert is_complete(final, "fp")
    verify_everything()
    try:
        assert not is_complete(final, "fp")
    finally:
        verify_everything(False)
