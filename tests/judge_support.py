"""Shared by the judge tests: run the judge in-process, and a private workspace with freshly recorded references."""
import contextlib
import io
import os
import shutil
from pathlib import Path

import pytest

from practice.judgekit import cli
from practice.judgekit.settings import PRACTICE, REPO


def judge(*args: str) -> tuple[int, str]:
    """Run `python practice/judge.py ARGS` in-process (the learner code still runs in a subprocess)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(list(args))
    return code, out.getvalue()


def judge_env(tmp_path_factory, name: str) -> dict:
    """Options pointing at a temporary workspace, references recorded here, and a private model copy."""
    model = Path(os.environ.get("SPEC_JUDGE_MODEL") or REPO / "models" / "tiny-qwen3")
    if not model.is_dir():
        pytest.skip(f"model {model} missing: the real-model exercises cannot be recorded")
    root = tmp_path_factory.mktemp(name)
    shutil.copytree(model, root / "model")
    shutil.copytree(PRACTICE / "references", root / "references")
    opts = ["--workspace", str(root / "workspace"), "--references", str(root / "references"),
            "--model", str(root / "model")]
    code, out = judge(*opts, "record", "--stale")
    assert code == 0, out
    return {"opts": opts, "root": root}
