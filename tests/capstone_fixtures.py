"""The capstone tests' shared fixtures: the models loaded once per module, settings with a fresh workspace."""
import dataclasses
from pathlib import Path

import pytest

from practice.judgekit.capstone import Models
from practice.judgekit.settings import Settings


@pytest.fixture(scope="module")
def models() -> Models:
    return Models.load(Settings())


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return dataclasses.replace(Settings(), workspace=tmp_path)
