"""What a checked file's project declares that fixes must respect.

- *The oldest torch the code must run on* (``target-torch``): from the configuration, else
  the lowest version the project's declared torch requirement admits (``pyproject.toml``
  ``[project]`` dependencies and optional dependencies, ``*requirement*.txt``,
  ``requirements/*.txt``, ``setup.cfg``, ``setup.py``, a conda environment file: ``environment.yml`` or any YAML with a top-level ``dependencies:``, a Cog ``cog.yaml``'s ``python_packages``;
  where none of a folder's files bounds torch, the versions its README, INSTALL or
  GETTING_STARTED documents state (and their Markdown tables: ``| torch | >=2.0 |``): ``conda install pytorch==1.11.0``, "PyTorch version 1.7.1"),
  else unknown — rules then assume current torch. The declaration nearest to the file
  wins: a subproject (a folder between the file and the configuration's root) that
  declares its own torch is held to it (``EVA/EVA-CLIP/requirements.txt`` pins
  ``torch>=1.9`` inside a repository that declares nothing).
- *Whether fixes may import amplint.runtime* (RULES.md, runtime-dependency policy): only
  when the project declares amplint as a dependency in one of those files, or sets
  ``runtime-helpers = true``; a fix that adds the import makes amplint a run-time
  dependency of the user's code.

Requirements are read with ``packaging`` (the parser pip uses); a file that cannot be
read or parsed declares nothing.
"""

from __future__ import annotations

import ast
import configparser
import fnmatch
import functools
import os
import re
import sys
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

TorchVersion = tuple[int, int]

_REQUIREMENT_FILES = ("*requirement*.txt", "requirements/*.txt")
# A conda environment may have any name (`se3.yml`); a YAML file is read as one only when
# it has a top-level `dependencies:` list. Projects also keep them in a folder of their own
# (equiformer_v2's `env/env_equiformer_v2.yml` pins `pytorch=1.13.1`).
_CONDA_FOLDERS = ("env", "envs", "environment", "environments", "conda")
_CONDA_FILES = tuple(
    f"{folder}{name}" for folder in ("", *(f"{place}/" for place in _CONDA_FOLDERS)) for name in ("*.yml", "*.yaml")
)
# Every file name a folder's declarations may come from (the cache watches them).
DECLARATION_FILES = ("pyproject.toml", *_REQUIREMENT_FILES, "setup.cfg", "setup.py", *_CONDA_FILES, "cog.yaml")
# `- pytorch=2.0.0` / `- torch==2.0.0` / `- pytorch >= 1.13` in a conda environment (conda
# pins with one `=`).
_CONDA_TORCH = re.compile(r"^(pytorch|torch|torchvision|torchaudio)\s*(==?|>=|~=)\s*([0-9][0-9.]*\*?)")
# README.md, INSTALL.md, install.rst, GETTING_STARTED.md, README (and the same but README
# in docs/: XMem's docs/GETTING_STARTED.md says "PyTorch 1.11+"): read only when no file of
# the folder bounds torch.
_INSTALL_DOCUMENT = re.compile(
    r"^(?:readme|install(?:ation)?|get(?:ting)?[_-]?started)(?:\.(?:md|rst|txt|markdown))?$", re.IGNORECASE
)
_INSTALL_ONLY = re.compile(
    r"^(?:install(?:ation)?|get(?:ting)?[_-]?started|prerequisites?|requirements|environment|setup)(?:\.(?:md|rst|txt|markdown))?$",
    re.IGNORECASE,
)
# An install or environment script (Graphormer's install.sh pins `torch==1.9.1+cu111`,
# BinauralGrad's prepare_env.sh `torch==1.7.0`, UniAudio's requirement.sh `torch==2.0.1`):
# its commands only.
_INSTALL_SCRIPT = re.compile(r"^[\w.-]*(?:install|env|setup|requirement)[\w.-]*\.sh$", re.IGNORECASE)
# A container build file (`Dockerfile`, `Dockerfile.train`, `Dockerfile-neuralangelo`,
# `gpu.Dockerfile`), in the folder
# or its `docker/` (FourCastNet's `docker/Dockerfile` starts from NGC's 21.11 image): its
# base image and its commands.
_CONTAINER_FILE = re.compile(r"^(?:dockerfile(?:[.-][\w.-]+)?|[\w.-]+\.dockerfile)$", re.IGNORECASE)
# Prose that names the version it was built or tested with ("PyTorch version 1.7.1",
# "tested with PyTorch 1.10.0", "PyTorch 1.12+"): at least that version.
_STATED_TORCH = re.compile(
    r"(?<![\w.-])(?:py)?torch(?:(?:\s+(?:version|install(?:ed|ation)?))?\s*:?\s+v?|(?=[0-9]+\.[0-9])"
    r"|\s*\(\s*v?(?=[0-9]+\.[0-9]+(?:\.[0-9]+)?\s*\)))([0-9]+\.[0-9]+(?:\.[0-9]+)?)",
    re.IGNORECASE,
)  # "PyTorch 1.12", "PyTorch version 1.7.1", "PyTorch install 1.7.1" (suncet's requirements list),
# "pytorch: torch2.0.0, torch2.0.1" (facechain's verified environments), "- torch: 2.0.1"
# (PytorchOCR's environment list), "* pytorch (1.11.0)" (MaxMatch-SimCSE's dependency list)
# `cd ImageBind` (on this line or an earlier one of the block), `pip install -r requirements.txt`.
# `conda env create -f scripts/environment.yaml` (imaginaire's INSTALL.md) likewise.
_CD_OR_PIP_INSTALL_R = re.compile(
    r"\bcd\s+([\w./-]+)"
    r"|\bpip3?\s+install\s+(?:-[\w-]+\s+)*-r\s+([\w./-]+)"
    r"|\b(?:conda|mamba|micromamba)\s+env\s+(?:create|update)\s+(?:-[\w-]+(?:\s+[\w.-]+)?\s+)*?(?:-f|--file)[\s=]+([\w./-]+)"
)
# A conda pin's single `=` is `==`; "PyTorch ≥ 1.8" (Detic's docs/INSTALL.md) is `>=`.
_DOCUMENT_OPERATORS = {"=": "==", "-": "==", "\u2265": ">="}
# A torch version written with its operator in a document: `pip install torch==1.8.0+cu111`,
# `conda install pytorch==1.11.0` or `pytorch=1.8`, "Pytorch>=1.8.0"; a version after another
# name (`torchvision==`, `pytorch-lightning==`) does not count.
_DOCUMENTED_TORCH = re.compile(
    # ... also in parentheses (CellViT's "Install torch (>=2.0) for your system"), and after
    # "should be" / "must be" (LoRAT's "PyTorch version should be >= 2.0.", round BO).
    r"(?<![\w.-])(?:py)?torch(?:\s+version)?(?:\s+(?:should|must)\s+be)?\s*(?:\(\s*)?-?\s*(==|>=|~=|=|\u2265|-(?=v?[0-9]))\s*v?([0-9]+\.[0-9]+(?:\.[0-9]+)?)",
    re.IGNORECASE,
)
# `conda install pytorch torchvision cudatoolkit=11.3 -c pytorch`: the pytorch channel built
# torch against a `cudatoolkit` package up to torch 1.12; from 1.13 it takes `pytorch-cuda=`
# (ProteinMPNN's README), so an unpinned pytorch installed this way is 1.12 at the newest.
_CONDA_CUDATOOLKIT = re.compile(
    r"\bconda\s+install\b[^\n]*?(?<![\w-])pytorch(?![\w-]|\s*[=<>~])[^\n]*?\bcudatoolkit\s*=", re.IGNORECASE
)
# From torch 1.13 the pytorch channel builds against `pytorch-cuda=X`, each X for a few
# releases only: 11.6 for 1.13, 11.7 for 1.13 and 2.0 (ASP's environment.yml lists an unpinned
# `pytorch` beside `pytorch-cuda=11.7`, which resolves to 2.0 at the newest). Later ones reach
# torch 2.4 or newer, so they bound nothing that matters here.
_PYTORCH_CUDA_NEWEST = {"11.6": "1.13", "11.7": "2.0"}
_PYTORCH_CUDA = re.compile(r"(?<![\w-])pytorch-cuda\s*==?\s*(11\.[67])(?![\d.])", re.IGNORECASE)
_CONDA_PYTORCH_CUDA = re.compile(r"\bconda\s+install\b[^\n]*?" + _PYTORCH_CUDA.pattern, re.IGNORECASE)
# A torch wheel named by its file (PyContrast's requirements.txt lists
# `https://download.pytorch.org/whl/cu100/torch-1.2.0-cp36-cp36m-linux_x86_64.whl`): that release.
_TORCH_WHEEL = re.compile(r"(?<![\w.-])torch-([0-9]+\.[0-9]+(?:\.[0-9]+)?)(?:(?:\+|%2B)[\w.]+)?-[\w.-]*\.whl\b", re.IGNORECASE)
# An apex fork (`git clone https://github.com/ptrblck/apex.git`, SimXNS's MASTER; `qywu/apex`):
# a copy of apex as it was, with its apex.amp.
_APEX_FORK = re.compile(r"github\.com/(?!nvidia/)[\w.-]+/apex(?:\.git)?(?![\w-])", re.IGNORECASE)
_APEX_AT_COMMIT = re.compile(r"apex(?:\.git)?(?:/tree/|/commit/|@)[0-9a-f]{6,40}\b", re.IGNORECASE)
_GIT_AT_COMMIT = re.compile(r"\bgit\s+(?:checkout|reset\s+--hard)\s+[0-9a-f]{6,40}\b")
# ... or at one of apex's monthly release tags (`git checkout 22.03`: DiffusionDepth, round AV);
# apex removed `apex.amp` in April 2025 (NVIDIA/apex#1896), so a tag before 25.04 keeps it.
_GIT_AT_RELEASE = re.compile(r"\bgit\s+(?:checkout|reset\s+--hard)\s+(?:tags/)?v?([0-9]{2})\.([0-9]{2})(?:\.[0-9]+)?(?![\w.])")
_APEX_AMP_REMOVED = (25, 4)
# The version before the name: "with 11.1 CUDA and 1.10.2 pytorch" (SyncDreamer's README).
_TORCH_AFTER_VERSION = re.compile(
    r"(?<!torchvision\s)(?<!torchaudio\s)(?<!python\s)(?<!cuda\s)(?<![\w.=<>~-])v?([0-9]\.[0-9]+(?:\.[0-9]+)?)\s+(?:py)?torch(?![\w-])",
    re.IGNORECASE,
)
# A Python no newer than 3.7 ("Install Python 3.7", `conda create -n x python=3.7`): torch 1.13
# was the last release for it (ModernTCN). "Python 3.7+" and ">=3.7" are minimums, not this.
_OLD_PYTHON = re.compile(
    r"(?<![\w./-])python\s*(?:={1,2}\s*)?3\.[0-7](?:\.[0-9]+)?(?![\d+/]|\s*(?:or|and)\s+(?:later|newer|above|higher))",
    re.IGNORECASE,
)
# ... a path segment (`lib/python3.7/site-packages/carla.pth`) names a folder, not the
# Python to install; and a document that also names a newer Python as one to install
# (Bench2DriveZoo: "python3.8 should be strictly followed", `python=3.8`) is not held to 3.7.
_NEWER_PYTHON = re.compile(r"(?<![\w./-])python\s*(?:={1,2}\s*)?3\.(?:[89]|1[0-9])(?![\d/])", re.IGNORECASE)
# ... unless the document allows a newer one (croco: python=3.7 "is required only for the
# interactive demo ... use a more recent python version").
_NEWER_PYTHON_ALLOWED = re.compile(r"\b(?:more\s+recent|newer|later)\s+python\b", re.IGNORECASE)
# PyTorch's long-term-support channel only ever shipped torch 1.8 (`conda install pytorch
# -c pytorch-lts`, `pip install ... -f https://download.pytorch.org/whl/lts/1.8/...`).
_LTS_TORCH = re.compile(r"-c\s+pytorch-lts\b|download\.pytorch\.org/whl/lts/1\.8\b", re.IGNORECASE)
# Markup between "PyTorch" and its version: a Markdown link (bevfusion's README says
# `[PyTorch](https://github.com/pytorch/pytorch) >= 1.9, \<= 1.10.2`) reads as its text, an
# escaped character as itself; code and bold marks (STCN's "PyTorch `1.8.1`") go.
_MARKDOWN_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\s]*\)")
_MARKDOWN_ESCAPE = re.compile(r"\\([<>=~])")
# A README's link to its install guide ("Please refer to [Installation Guide](docs/prepare_env/
# install_guide.md)": Real3DPortrait): a local Markdown or reST document that the link's
# words or the file's name call an install, environment or setup guide.
_LINKED_DOCUMENT = re.compile(r"\[([^\]\n]*)\]\(\s*(?:\./)?([\w./-]+\.(?:md|rst|markdown|txt))(?:#[^)\s]*)?\s*\)", re.IGNORECASE)
_LOCAL_LABEL = re.compile(r"(?<=[0-9])\+[a-z0-9][a-z0-9.]*", re.IGNORECASE)
_INSTALL_COMMAND = re.compile(r"\b(?:pip3?|conda|mamba|micromamba)\s+install\b", re.IGNORECASE)
_GUIDE_WORDS = re.compile(r"install|environment|setup|set up|prerequisite|getting[ _-]?started|requirement", re.IGNORECASE)
_BADGE = re.compile(r"https?://img\.shields\.io/badge/([^)\s\"']+)")
# A container image that fixes the torch inside it: PyTorch's own (`pytorch/pytorch:1.13.1-cuda11.6-
# cudnn8-devel`), also from a registry or a mirror of it (`docker.io/pytorch/pytorch:2.3.1`,
# ModelGenerator's `ai4s-cn-beijing.cr.volces.com/pytorch-mirror/pytorch:2.3.1-...`, round BM), or
# NVIDIA's NGC release (`nvcr.io/nvidia/pytorch:21.11-py3`), named by year and month.
_PYTORCH_IMAGE = re.compile(
    r"(?<![\w./:-])(?:[\w.:-]+/)*?[\w.-]*pytorch[\w.-]*/pytorch:v?([0-9]+\.[0-9]+(?:\.[0-9]+)?)", re.IGNORECASE
)
_NGC_IMAGE = re.compile(r"nvcr\.io/nvidian?/pytorch:([0-9]{2})\.([0-9]{2})", re.IGNORECASE)
# A project's own image named for its torch (SwinBERT: "We provide a [Docker
# image](https://hub.docker.com/r/linjieli222/videocap_torch1.7/tags)"; `docker pull
# user/videocap_torch1.7:fairscale`).
_TORCH_NAMED_IMAGE = re.compile(
    r"(?:hub\.docker\.com/r/|docker\s+(?:run|pull)\b[^\n]*?\s)[\w.-]+/[\w.-]*?(?<![a-z])(?:py)?torch[-_]?v?([0-9]\.[0-9]+(?:\.[0-9]+)?)(?![\w.])",
    re.IGNORECASE,
)
# A torch release that NGC's PyTorch container of each month certainly holds: the last one
# PyTorch published two months or more before it (NGC ships a prerelease of the next torch,
# 21.11 has 1.11.0a0, so this is a lower bound, the safe side for a target).
_NGC_TORCH: tuple[tuple[tuple[int, int], TorchVersion], ...] = (
    ((18, 1), (0, 3)),
    ((18, 6), (0, 4)),
    ((19, 2), (1, 0)),
    ((19, 7), (1, 1)),
    ((19, 10), (1, 2)),
    ((19, 12), (1, 3)),
    ((20, 3), (1, 4)),
    ((20, 6), (1, 5)),
    ((20, 9), (1, 6)),
    ((20, 12), (1, 7)),
    ((21, 5), (1, 8)),
    ((21, 8), (1, 9)),
    ((21, 12), (1, 10)),
    ((22, 5), (1, 11)),
    ((22, 8), (1, 12)),
    ((22, 12), (1, 13)),
    ((23, 5), (2, 0)),
    ((23, 12), (2, 1)),
    ((24, 3), (2, 2)),
    ((24, 6), (2, 3)),
    ((24, 9), (2, 4)),
)
# The torch release a companion package's release is built for, for a folder whose files
# name no torch bound of their own (MONAI SwinMM pins only `torchvision==0.15.2`, which
# installs torch 2.0.1): torchvision 0.5 ... 0.14 go with torch 1.4 ... 1.13 and 0.15 on with
# 2.0 on; torchaudio 0.4 ... 0.13 with 1.4 ... 1.13, and from 2.0 its version is torch's.
_COMPANIONS = ("torchvision", "torchaudio", "torchtext")
# OpenMMLab's 1.x stack: every mmcv-full release, and every mmcv before 2.0, came out before
# torch 2.4 (mmcv-full's last, 1.7.2, in December 2023), so a folder held to one (BEV-Planner's
# `mmcv-full>=1.4.8,<=1.6.0`) runs a torch older than 2.4.
_MMCV_1 = ("mmcv-full", "mmcv")
_BEFORE_TORCH_2_4 = "torch<2.4"
# "PyTorch ... at least 1.7" in one clause (StudioGAN's "install PyTorch meeting your
# environment (at least 1.7)").
# Up to N characters of the same sentence that name nothing else with a version of its own.
_NOT_ANOTHER_VERSIONED = r"(?:(?!(?:cudnn|cuda|python|gcc|driver|nccl|numpy)\s*v?[0-9])[^.\n]){{0,{}}}?"
_AT_LEAST_TORCH = re.compile(
    # ... also in the next sentence when it says "at least version" ("Install
    # [PyTorch](https://...). You need at least version 1.6", nnU-Net's readme, vendored by
    # CoTr; the link is plain text by then).
    # The version must not belong to another thing named in between ("pytorch from source
    # ... using cuDNN 8.0.2 or newer", nnU-Net's readme).
    r"(?<![\w.-])(?:py)?torch\b(?:\.\s+(?=[^.\n]{0,40}?\bat\s+least\s+version\b))?" + _NOT_ANOTHER_VERSIONED.format(60) + r"\bat\s+least\s+(?:version\s+)?v?([0-9]+\.[0-9]+(?:\.[0-9]+)?)"
    # ... or "X or greater" (knn-vc: "torch must be v2.0 or greater"), not PyTorch Lightning's.
    r"|(?<![\w.-])(?:py)?torch\b(?!\s*[-_]?lightning)" + _NOT_ANOTHER_VERSIONED.format(40) + r"\bv?([0-9]+\.[0-9]+(?:\.[0-9]+)?)\s+or\s+(?:greater|higher|later|newer|above)\b",
    re.IGNORECASE,
)
# A Markdown table row naming torch's version in its next cell: `| torch | >=2.0 | 2.8.0 |`
# (ms-swift's environment table); a bare version there reads as "at least".
_TABLED_TORCH = re.compile(
    r"^\s*\|\s*(?:py)?torch\s*\|\s*(==|>=|~=|\u2265)?\s*v?([0-9]+\.[0-9]+(?:\.[0-9]+)?)", re.IGNORECASE | re.MULTILINE
)


@dataclass(frozen=True)
class ProjectFacts:
    """The facts about a project that rules' fixes depend on."""

    # The oldest torch the code must run on; None: not declared (current torch assumed).
    target_torch: TorchVersion | None = None
    # Fixes may make the code import amplint.runtime.
    runtime_helpers: bool = False
    # The project's apex still has apex.amp: the NVIDIA PyTorch container its build file
    # starts from predates native AMP (before 20.06, UNITER's `FROM nvcr.io/nvidia/pytorch:19.05-py3`),
    # its torch is held below native AMP (`torch==1.4.0`: only an apex of that time builds
    # there), or its install documents pin apex to a commit (unilm's `git reset --hard 1603407`).
    apex_amp_available: bool = False
    # The newest torch the code may run on, where every bound the project declares for it
    # caps torch (`torch==2.1.2`, `torch<2.4`); None: any newer release may run it.
    newest_torch: TorchVersion | None = None

    def torch_has(self, introduced: TorchVersion) -> bool:
        """Does every torch the code must run on have an API introduced in ``introduced``?"""
        return self.target_torch is None or self.target_torch >= introduced

    def torch_may_reach(self, release: TorchVersion) -> bool:
        """May the code run on ``release`` or newer (no declared cap below it)?"""
        return self.newest_torch is None or self.newest_torch >= release

    def declares_torch_from(self, release: TorchVersion) -> bool:
        """Does the project say its code runs only on ``release`` or newer? Unlike
        :meth:`torch_has`, an undeclared target does not count."""
        return self.target_torch is not None and self.target_torch >= release


def parse_torch_version(text: str) -> TorchVersion | None:
    """``"2.4"``, ``"2.4.1"``, ``"2.4.0+cpu"`` → (2, 4); None when not a version."""
    try:
        release = Version(text.strip()).release
    except InvalidVersion:
        return None
    return (release[0], release[1] if len(release) > 1 else 0)


def lowest_admitted(requirement: Requirement) -> TorchVersion | None:
    """The lowest (major, minor) a requirement's specifiers admit, when they bound it below;
    for one bounded only above (``torch<2.0``), the newest release it admits (1.13): the
    code runs on some torch no newer than that, so no API newer is there for it."""
    lowest: TorchVersion | None = None
    for specifier in requirement.specifier:
        version = specifier.version
        if specifier.operator == "==" and version.endswith(".*") and "." in version[:-2]:
            version = version[:-2]  # `==1.12.*`: some 1.12.x (OpenComplex's conda `pytorch=1.12.*`)
        if specifier.operator in (">=", "==", "~=", ">", "===") and "*" not in version:
            found = parse_torch_version(version)
            if found is not None and (lowest is None or found > lowest):
                lowest = found  # several lower bounds: the strictest holds
    if lowest is not None:
        return lowest
    ceilings = [_newest_below(specifier.operator, specifier.version) for specifier in requirement.specifier]
    return min((ceiling for ceiling in ceilings if ceiling is not None), default=None)


def newest_admitted(requirement: Requirement) -> TorchVersion | None:
    """The newest (major, minor) a requirement admits, when it bounds torch above
    (``==1.4.0``, ``~=1.4.0``, ``<1.6``); None when any newer release would do."""
    newest: TorchVersion | None = None
    for specifier in requirement.specifier:
        version = specifier.version.removesuffix(".*")
        if specifier.operator in ("==", "===") and specifier.version.endswith(".*") and "." not in version:
            found = None  # `==2.*`: any 2.x
        elif specifier.operator in ("==", "==="):
            found = parse_torch_version(version)
        elif specifier.operator == "~=" and version.count(".") >= 2:
            found = parse_torch_version(version)  # `~=1.4.0`: 1.4.x
        else:
            found = _newest_below(specifier.operator, specifier.version)
        if found is not None and (newest is None or found < newest):
            newest = found
    return newest


# The first torch with native AMP (torch.cuda.amp).
NATIVE_AMP_TORCH: TorchVersion = (1, 6)
# The last minor release of each torch major that has a successor.
_LAST_MINOR = {0: 4, 1: 13}


def _newest_below(operator: str, version: str) -> TorchVersion | None:
    """The newest (major, minor) that ``<= version`` or ``< version`` admits."""
    if operator not in ("<", "<=") or "*" in version:
        return None
    try:
        release = Version(version).release
    except InvalidVersion:
        return None
    major, minor = release[0], release[1] if len(release) > 1 else 0
    if operator == "<=" or any(release[2:]):
        return (major, minor)  # `<=1.12`, `<1.12.2`: 1.12 is admitted
    if minor > 0:
        return (major, minor - 1)
    last = _LAST_MINOR.get(major - 1)
    return (major - 1, last) if last is not None else None


@dataclass(frozen=True)
class Declared:
    """The requirements a project's files declare."""

    torch: tuple[Requirement, ...] = ()
    amplint: bool = False
    # A document installs NVIDIA apex at a fixed commit (unilm's `git reset --hard 1603407`):
    # an apex of its day, which still has apex.amp.
    apex_pinned: bool = False


def declared_requirements(root: Path) -> Declared:
    """The torch requirements and whether amplint is required, in ``root``'s project files."""
    folder = root.resolve()
    # Keyed by the files' sizes and times too: a long-lived process (--watch, the editor
    # server) sees an edited requirements file.
    signature = []
    for path in _declaration_files(folder):
        try:
            info = path.stat()
        except OSError:
            continue
        signature.append((str(path), info.st_size, info.st_mtime_ns))
    return _declared(folder, tuple(signature))


@functools.lru_cache(maxsize=4096)
def _declared(root: Path, signature: tuple[tuple[str, int, int], ...]) -> Declared:
    torch: list[Requirement] = []
    companions: list[Requirement] = []
    amplint = False
    for requirement in _requirements(root):
        name = requirement.name.lower().replace("_", "-")
        if name == "torch":
            torch.append(requirement)
        elif name == "amplint":
            amplint = True
        elif name in _COMPANIONS or name in _MMCV_1:
            companions.append(requirement)
    if all(lowest_admitted(requirement) is None for requirement in torch):
        torch.extend(_companion_torch(companions))
    if all(lowest_admitted(requirement) is None for requirement in torch):
        # No file of the folder bounds torch (none names it, or only a bare `torch`): its
        # README or INSTALL may still say which (`conda install pytorch==1.11.0`,
        # "Pytorch>=1.8.0": ConvNeXt-V2, FastViT; "Torch==1.11" beside EfficientFormer's
        # bare requirement).
        torch.extend(_documented_torch(root))
        torch.extend(_conda_python_implied(root))
    return Declared(tuple(torch), amplint, _pins_apex(root))


def _companion_torch(companions: Iterable[Requirement]) -> Iterator[Requirement]:
    """The torch that the lowest release a torchvision or torchaudio requirement admits
    is built for; for an mmcv held below 2.0, a torch older than 2.4."""
    for requirement in companions:
        if requirement.name.lower().replace("_", "-") in _MMCV_1:
            newest = newest_admitted(requirement)
            if newest is not None and newest < (2, 0):
                yield Requirement(_BEFORE_TORCH_2_4)
            continue
        lowest = lowest_admitted(requirement)
        torch = None if lowest is None else companion_torch(requirement.name.lower(), lowest)
        if torch is not None:
            yield Requirement(f"torch>={torch[0]}.{torch[1]}")


def companion_torch(name: str, release: TorchVersion) -> TorchVersion | None:
    """The torch release that ``name`` (torchvision, torchaudio, torchtext) at ``release``
    goes with."""
    major, minor = release
    # torchtext kept torchvision's numbering (0.6 with torch 1.5) until its last release, 0.18.
    if (name == "torchvision" or (name == "torchtext" and minor <= 18)) and major == 0:
        if 5 <= minor <= 14:
            return (1, minor - 1)
        if minor >= 15:
            return (2, minor - 15)
    if name == "torchaudio":
        if major == 0 and 4 <= minor <= 13:
            return (1, minor)
        if major >= 2:
            return release
    return None


class ApexContainerTorch(Requirement):
    """The torch of the NVIDIA NGC PyTorch container a folder's container build file starts
    from, when that container predates native AMP and ships an apex with apex.amp."""


def _newest_torch_for_python(minor: int) -> str:
    """The last torch release with wheels for Python 3.<minor>, for 3.7 and older: 1.5 for
    3.5 (torch 1.6 dropped it), 1.10 for 3.6, 1.13 for 3.7."""
    return "1.5" if minor <= 5 else "1.10" if minor == 6 else "1.13"


def _minor(spelled: str) -> int:
    """The minor version of the first ``3.N`` in ``spelled`` (``python=3.6`` → 6)."""
    found = re.search(r"3\.([0-9]+)", spelled)
    return int(found.group(1)) if found is not None else 7


class PythonImpliedTorch(Requirement):
    """The newest torch an old Python a document names can run (`python=3.7`: torch 1.13;
    3.6: 1.10; 3.5: 1.5):
    it bounds torch for that folder's code, but says nothing about code elsewhere in the
    repository (SparseTrack's vendored TrackEval was "tested on Python 3.7")."""


# The first NGC PyTorch container with native AMP (torch.cuda.amp, in its 1.6 prerelease).
_NGC_NATIVE_AMP = (20, 6)


def ngc_torch(year: int, month: int) -> TorchVersion | None:
    """A torch release that NGC's PyTorch container ``YY.MM`` certainly holds (None: older
    than any this knows)."""
    held = None
    for since, torch in _NGC_TORCH:
        if (year, month) >= since:
            held = torch
    return held


def project_facts(
    root: Path,
    *,
    target_torch: str | None = None,
    runtime_helpers: bool | None = None,
    file: Path | None = None,
) -> ProjectFacts:
    """The facts for ``file`` (or any file) of the project rooted at ``root``; explicit
    settings win. Torch comes from the nearest folder, from the file's up to ``root``,
    that declares it; amplint counts when any of those folders declares it."""
    folders = declaring_folders(root, file)
    declarations = [declared_requirements(folder) for folder in folders]
    target = parse_torch_version(target_torch) if target_torch else None
    if target is None:
        # The nearest folder that bounds torch: a bare `torch` says nothing about the release
        # (LMOps's vendored fairseq lists one; the README above it installs in PyTorch's 1.7.1
        # image). Several declarations in it (requirements.txt and pyproject): the oldest must
        # work. Where none does, the folders nearby that agree on one target (torch_folders).
        agreeing = _agreeing_folders_beyond(root, folders, declarations)
        searched = [*declarations, *(declared_requirements(folder) for folder in agreeing)]
        nearest = next((declared.torch for declared in searched if _bounds(declared.torch)), ())
        target = min(_bounds(nearest)) if nearest else None
        container = target is not None and any(
            isinstance(requirement, ApexContainerTorch) and lowest_admitted(requirement) == target for requirement in nearest
        )
        # Current apex needs a torch with native AMP (its own code uses torch.cuda.amp since
        # 2020): a project held to an older torch (`torch==1.4.0`, `pytorch/pytorch:1.1.0`)
        # can only build an apex of that time, which has apex.amp.
        # A ceiling alone (`torch<=1.13` from layoutlm's `python=3.6`) admits the pin below it
        # and so does not speak against it; a floor that admits newer torch does.
        bounded = [requirement for requirement in nearest if lowest_admitted(requirement) is not None]
        held_back = any(_held_below(requirement, NATIVE_AMP_TORCH) for requirement in bounded) and all(
            _held_below(requirement, NATIVE_AMP_TORCH) for requirement in bounded if _has_floor(requirement)
        )
        ceilings = [ceiling for ceiling in map(newest_admitted, bounded) if ceiling is not None]
        newest = max(ceilings) if bounded and len(ceilings) == len(bounded) else None
    else:
        container = held_back = False
        newest = None
    declares_amplint = any(declared.amplint for declared in declarations)
    helpers = declares_amplint if runtime_helpers is None else runtime_helpers
    apex_amp = container or held_back or any(declared.apex_pinned for declared in declarations)
    return ProjectFacts(target_torch=target, newest_torch=newest, runtime_helpers=helpers, apex_amp_available=apex_amp)


def _held_below(requirement: Requirement, version: TorchVersion) -> bool:
    newest = newest_admitted(requirement)
    return newest is not None and newest < version


def _has_floor(requirement: Requirement) -> bool:
    return any(specifier.operator not in ("<", "<=") for specifier in requirement.specifier)


def _bounds(requirements: Iterable[Requirement]) -> list[TorchVersion]:
    return [bound for bound in map(lowest_admitted, requirements) if bound is not None]


def torch_folders(root: Path, file: Path | None = None) -> list[Path]:
    """The folders the target torch of ``file`` is read from: its own and each parent up to
    ``root``; and where none of them bounds torch, the folders that do under the nearest of
    those parents that holds several (or under ``root`` the only one), if they all state
    one target (Nystromformer states
    "pytorch==1.7.1" only in `LRA/README.md`, UniAudio only in `UniAudio/requirement.sh`;
    TFace's four recognition tasks each say torch>=1.7.1 beside their shared `torchkit`).
    Where they differ, as in a monorepo of independent projects (MONAI's
    research-contributions, Microsoft's Cream), none speaks for the others; a folder inside
    another of them is a part of that project, not one more (LUPerson's fast-reid). A folder bounded only by an old Python its documents name (`python=3.7`) speaks for
    itself alone (SparseTrack's vendored TrackEval)."""
    folders = declaring_folders(root, file)
    return [*folders, *_agreeing_folders_beyond(root, folders, [declared_requirements(folder) for folder in folders])]


def _agreeing_folders_beyond(root: Path, folders: Sequence[Path], declarations: Sequence[Declared]) -> list[Path]:
    """Where none of ``declarations`` (those of ``folders``, from a file up to ``root``) bounds
    torch: the folders that do under the nearest of ``folders`` that holds several, or
    under ``root`` the only one, when they all state the same target; else none."""
    if any(_bounds(declared.torch) for declared in declarations):
        return []
    top = root.resolve()
    walked = _project_walk(top)
    if walked is None:
        return []
    links = walked[1]
    for folder in folders:
        # A package folder that links to the source (fairchem's `packages/fairchem-core/src
        # -> ../../src`, whose pyproject says torch>=2.2) declares for it.
        for holder in links.get(folder, ()):
            linked = [place for place in declaring_folders(top, holder / "_") if place not in folders]
            if any(_bounds(declared_requirements(place).torch) for place in linked):
                return linked
    for folder in folders:
        under = _bounding_under(top, folder)
        if len(under) == 1 and folder != folders[-1]:
            # One subproject beside the file's folder is a project of its own (LLaMA-Adapter's
            # gorilla/ vendors the Gorilla repository's inference code): look further out.
            continue
        if under:
            return [found for found, _ in under] if len({target for _, target in under}) == 1 else []
    return []


@functools.lru_cache(maxsize=4096)
def _bounding_under(root: Path, folder: Path) -> tuple[tuple[Path, TorchVersion], ...]:
    """The outermost folders below ``folder`` that bound torch (of those under ``root``), with
    their targets: asked for every folder from each file up, so kept, and compared as
    strings. A folder inside another that bounds torch is a part of that project (LUPerson's
    fast-reid pins 1.6; a project under it says >=1.1): the outer one speaks for both."""
    prefix = os.path.join(str(folder), "")
    walked = _project_walk(root)
    below = [(found, target) for found, target in (walked[0] if walked else ()) if str(found).startswith(prefix)]
    return tuple((found, target) for found, target in below if not any(other in found.parents for other, _ in below))


# Folders never searched for the project's torch: tools' and environments' own.
_NOT_PROJECT_FOLDERS = frozenset({"node_modules", "site-packages", "venv", "__pycache__", "build", "dist"})
_PROJECT_FOLDER_LIMIT = 5000


@functools.lru_cache(maxsize=64)
def _project_walk(
    root: Path,
) -> tuple[tuple[tuple[Path, TorchVersion], ...], dict[Path, tuple[Path, ...]]] | None:
    """The folders under ``root`` (hidden and environment folders aside) whose declarations
    bound torch, with the target each states; and each folder under ``root`` that a symbolic
    link elsewhere under it points to, with the folders holding such links. None when there
    are more than ``_PROJECT_FOLDER_LIMIT`` folders to search."""
    found: list[tuple[Path, TorchVersion]] = []
    links: dict[Path, list[Path]] = {}
    pending, seen = [root], 0
    while pending and seen < _PROJECT_FOLDER_LIMIT:
        folder = pending.pop()
        seen += 1
        children: list[str] = []
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.startswith(".") or entry.name in _NOT_PROJECT_FOLDERS:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        children.append(entry.name)
                    elif entry.is_symlink() and entry.is_dir():
                        target = Path(os.path.realpath(entry.path))
                        if root in target.parents:
                            links.setdefault(target, []).append(folder)
        except OSError:
            continue
        pending.extend(folder / name for name in sorted(children, reverse=True))
        declared = declared_requirements(folder).torch if _declaration_names(folder) else ()
        if any(lowest_admitted(item) is not None and not isinstance(item, PythonImpliedTorch) for item in declared):
            found.append((folder, min(_bounds(declared))))
    if pending:
        return None
    return tuple(found), {target: tuple(holders) for target, holders in links.items()}


def declaring_folders(root: Path, file: Path | None = None) -> list[Path]:
    """The folders whose declarations apply to ``file``: its own, then each parent up to
    ``root``, nearest first (just ``root`` for a file outside it, or none given)."""
    top = root.resolve()
    if file is None:
        return [top]
    folder = file.resolve().parent
    if folder != top and top not in folder.parents:
        return [top]
    folders = [folder]
    while folder != top:
        folder = folder.parent
        folders.append(folder)
    return folders


def folder_declarations(folder: Path) -> tuple[tuple[Path, ...], str]:
    """The declaration files that exist in ``folder`` (what its facts were read from) and
    their listing (``declaration_listing``), from one look at the folder."""
    names = tuple(_declaration_names(folder))
    return _with_listed_requirements(folder, names), _listing(folder, names)


def _declaration_files(folder: Path) -> tuple[Path, ...]:
    # Listed afresh (a long-lived process, --watch or the editor server, sees a new file);
    # what the documents name is read once per listing.
    return _with_listed_requirements(folder, tuple(_declaration_names(folder)))


@functools.lru_cache(maxsize=4096)
def _with_listed_requirements(folder: Path, names: tuple[Path, ...]) -> tuple[Path, ...]:
    found = list(names)
    # The install guides the documents link to and the requirements files they say to
    # install: a cached result follows those too.
    for document in [*_install_documents(folder), *_other_linked_documents(folder)]:
        if document not in found:
            found.append(document)
        text = _read(document)
        if text is not None:
            found.extend(path for path in _listed_requirement_files(folder, text) if path.is_file() and path not in found)
    return tuple(found)


def folder_key(folder: Path) -> str:
    """How a folder's declaration listing is named among a cached result's dependencies
    (its path and a separator, which no file's path ends with)."""
    return f"{folder}{os.sep}"


def declaration_listing(folder: Path) -> str:
    """The declaration files ``folder`` holds now, by name: a cached result is dropped when
    one appears or goes, since the facts of every file below the folder may change."""
    return _listing(folder, _declaration_names(folder))


def _listing(folder: Path, names: Iterable[Path]) -> str:
    return "\n".join(str(path.relative_to(folder)) for path in names)


Listing = Callable[[str], dict[str, os.DirEntry[str]]]


def _lister(folder: Path) -> Listing:
    """The entries of ``folder`` (place "") or of a subfolder, by name; each read once."""
    listings: dict[str, dict[str, os.DirEntry[str]]] = {}

    def listing(place: str) -> dict[str, os.DirEntry[str]]:
        if place not in listings:
            listings[place] = {}
            if not place or place in listing(""):
                try:
                    with os.scandir(folder / place) as entries:
                        listings[place] = {entry.name: entry for entry in entries}
                except OSError:
                    pass
        return listings[place]

    return listing


def _declaration_names(folder: Path) -> list[Path]:
    """The declaration files and install documents in ``folder``: one listing of it, and
    of a subfolder only where a pattern names one that exists."""
    listing = _lister(folder)
    found: list[Path] = []
    for place, pattern in _DECLARATION_PATTERNS.items():
        names = listing(place)
        # Most entries are modules: no pattern but setup.py names one (a quick test first).
        found.extend(
            folder / place / name
            for name in sorted(names)
            if (not name.endswith(".py") or name == "setup.py") and pattern.match(name) and names[name].is_file()
        )
    return found


def _declaration_patterns() -> dict[str, re.Pattern[str]]:
    """``DECLARATION_FILES`` and the install documents' names as one expression per folder
    they name ("" for the folder itself); a wildcard does not match a leading dot, as in
    glob."""
    by_place: dict[str, list[str]] = {}
    for pattern in DECLARATION_FILES:
        place, _, name = pattern.rpartition("/")
        by_place.setdefault(place, []).append(r"(?!\.)" + fnmatch.translate(name))
    for place, document in _DOCUMENT_PLACES:
        by_place.setdefault(place, []).append(f"(?i:{document.pattern})")
    return {place: re.compile("|".join(names)) for place, names in by_place.items()}


_DOCUMENT_PLACES = (
    ("", _INSTALL_DOCUMENT),
    ("", _INSTALL_SCRIPT),
    ("", _CONTAINER_FILE),
    ("docs", _INSTALL_ONLY),
    ("docker", _CONTAINER_FILE),
)
_DECLARATION_PATTERNS = _declaration_patterns()


def _install_documents(folder: Path) -> list[Path]:
    """The folder's README, INSTALL and GETTING_STARTED documents, in any case
    (``README.md``, ``INSTALL.md``, ``install.rst``, ``README``), its install and
    environment scripts (``install.sh``, ``prepare_env.sh``), its container build files
    and its ``docker/`` folder's, the INSTALL and GETTING_STARTED documents of its
    ``docs/``, and the install guides those documents link to inside the folder."""
    found = _named_install_documents(folder)
    return found + _linked_documents(folder, tuple(found))[0]


def _other_linked_documents(folder: Path) -> list[Path]:
    """The documents other than install guides that the folder's install documents link to
    (Union14M's README: "check [pre-training](docs/pretrain.md)", whose first step is
    `pip install torch==1.8.1+cu111`): only their install commands are read."""
    return _linked_documents(folder, tuple(_named_install_documents(folder)))[1]


def _named_install_documents(folder: Path) -> list[Path]:
    listing = _lister(folder)
    found: list[Path] = []
    for place, pattern in _DOCUMENT_PLACES:
        names = listing(place)
        found.extend(folder / place / name for name in sorted(names) if pattern.match(name) and names[name].is_file())
    return found


@functools.lru_cache(maxsize=4096)
def _linked_documents(folder: Path, documents: tuple[Path, ...]) -> tuple[list[Path], list[Path]]:
    """The install guides and the other documents that ``documents`` link to inside
    ``folder`` (one step: a linked document's own links are not followed)."""
    top = folder.resolve()
    guides: list[Path] = []
    others: list[Path] = []
    for document in documents:
        if document.suffix == ".sh" or _CONTAINER_FILE.match(document.name):
            continue
        text = _read(document)
        if text is None:
            continue
        for words, target in _LINKED_DOCUMENT.findall(text):
            linked = (document.parent / target).resolve()
            if top not in linked.parents or linked in guides or linked in documents or not linked.is_file():
                continue
            if linked.stem.lower() == "readme" and linked.parent != top:
                # Another folder's README speaks for that folder (sapiens links the README of
                # its inference-only `lite/`, which states another torch).
                continue
            if _GUIDE_WORDS.search(words) or _GUIDE_WORDS.search(linked.name):
                guides.append(linked)
                if linked in others:
                    others.remove(linked)
            elif linked not in others:
                others.append(linked)
    return guides, others


# -- reading the files -------------------------------------------------------------------------------


def _requirements(root: Path) -> Iterator[Requirement]:
    return _parsed(_requirement_strings(root))


def _parsed(texts: Iterable[str]) -> Iterator[Requirement]:
    """The requirement strings that parse (as pip reads them); the others say nothing, except
    a local version label where PEP 440 allows none: `torch>=2.0.1+cu118` (SRGAN-PyTorch)
    still states its author's lowest torch."""
    for text in texts:
        try:
            yield Requirement(text)
        except InvalidRequirement:
            try:
                yield Requirement(_LOCAL_LABEL.sub("", text))
            except InvalidRequirement:
                continue


def _requirement_strings(root: Path) -> Iterator[str]:
    yield from _pyproject(root / "pyproject.toml")
    for pattern in _REQUIREMENT_FILES:
        for path in sorted(root.glob(pattern)):
            yield from _requirements_txt(path)
    yield from _setup_cfg(root / "setup.cfg")
    yield from _setup_py(root / "setup.py")
    for pattern in _CONDA_FILES:
        for path in sorted(root.glob(pattern)):
            yield from _conda_environment(path)
    yield from _cog(root / "cog.yaml")


# A frozen environment (`conda env export`, `pip freeze`) that pins apex beside an exact torch
# older than 2.4 (REFERS' environment.yml: `pytorch=1.7.0=py3.6_cuda10.1...` and pip's
# `apex==0.1`): its apex was built when that torch was current, long before apex.amp was
# removed in 2025. pip freeze writes a locally built apex as `apex @ file:///...` (Vim's
# seg-requirements.txt beside torch==1.12.1).
_APEX_EXACT = re.compile(r"^\s*(?:-\s*)?apex\s*(?:==\s*[0-9]|@\s*file:)", re.IGNORECASE | re.MULTILINE)
_TORCH_EXACT = re.compile(r"^\s*(?:-\s*)?(?:py)?torch\s*==?\s*([0-9]+\.[0-9]+)(?:\.[0-9]+)?(?:[=+\s]|$)", re.IGNORECASE | re.MULTILINE)
_APEX_FROZEN_BEFORE = (2, 4)


def _frozen_with_old_apex(text: str) -> bool:
    if not _APEX_EXACT.search(text):
        return False
    pins = [parse_torch_version(version) for version in _TORCH_EXACT.findall(text)]
    return bool(pins) and all(pin is not None and pin < _APEX_FROZEN_BEFORE for pin in pins)


def _pins_apex(root: Path) -> bool:
    """Does one of the folder's install documents or declaration files install NVIDIA apex
    at a fixed commit (``apex/tree/<sha>``, ``apex.git@<sha>``: hysts' requirements.txt has
    ``git+https://github.com/NVIDIA/apex.git@02a3387...``; or ``git checkout``/``git reset
    --hard <sha>`` just after apex is cloned, or a release tag from before apex dropped
    ``apex.amp``: ``git checkout 22.03``), or a frozen environment file pins apex beside
    an exact torch older than 2.4?"""
    declarations = set(_declaration_files(root))
    # A frozen environment is a file of its own (REFERS' exported environment.yml), not the
    # list a README shows before it clones current apex (ConSERT: `torch==1.6.0`,
    # `apex==0.1.0`, then `git clone https://github.com/NVIDIA/apex`).
    documents = _install_documents(root)
    frozen_candidates = set(_declaration_names(root)) - set(documents)
    for path in [*documents, *declarations]:
        text = _read(path)
        if text is None or "apex" not in text.lower():
            continue
        if _APEX_AT_COMMIT.search(text) or _APEX_FORK.search(text):
            return True
        if path in frozen_candidates and _frozen_with_old_apex(text):
            return True
        for found in _GIT_AT_COMMIT.finditer(text):
            if "apex" in text[max(0, found.start() - 300) : found.start()].lower():
                return True
        for found in _GIT_AT_RELEASE.finditer(text):
            release = (int(found.group(1)), int(found.group(2)))
            if release < _APEX_AMP_REMOVED and "apex" in text[max(0, found.start() - 300) : found.start()].lower():
                return True
    return False


def _documented_torch(root: Path) -> Iterator[Requirement]:
    """The torch versions a folder's README and INSTALL documents state: with an operator
    (a conda pin's single `=` reads as `==`), in a requirements file they say to install,
    or in prose as the version the code was built or tested with (at least that one).
    Several: the oldest holds, as for files."""
    for path in _install_documents(root):
        text = _read(path)
        if text is None:
            continue
        if path.suffix == ".sh" or _CONTAINER_FILE.match(path.name):
            # A script's comments are not its commands (NeMo's Dockerfile.speech explains
            # in one that vllm pins `torch==2.3.0`, which it then avoids).
            text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        container = bool(_CONTAINER_FILE.match(path.name))
        if container:
            text = _with_build_arguments(text)
        installed = list(_installed_requirements(root, text))
        yield from installed
        # A container build that installs its own torch replaces the base image's
        # (dllm-distillation: `FROM nvcr.io/nvidia/pytorch:24.08-py3`, then `pip install
        # torch==2.5.1`; round BJ): the image's torch is not what the code runs on.
        base_replaced = container and (bool(installed) or any(pin.name.lower() == "torch" for pin in _operator_pins(text)))
        for version in [] if base_replaced else _TORCH_NAMED_IMAGE.findall(text):
            yield Requirement(f"torch=={version}")
        for version in _TORCH_WHEEL.findall(text):
            yield Requirement(f"torch=={version}")
        plain = _MARKDOWN_ESCAPE.sub(r"\1", _MARKDOWN_LINK.sub(r"\1", text)).replace("`", "").replace("**", "")
        # A badge's label is in its URL, its characters escaped (FullSubNet's
        # `![PyTorch](https://img.shields.io/badge/PyTorch-%3E%3D1.7-brightgreen)`).
        badges = "\n".join(urllib.parse.unquote(url) for url in _BADGE.findall(text))
        text = f"{plain}\n{badges}"
        for version in [] if base_replaced else _PYTORCH_IMAGE.findall(text):
            yield Requirement(f"torch=={version}")
        for year, month in [] if base_replaced else _NGC_IMAGE.findall(text):
            torch = ngc_torch(int(year), int(month))
            if torch is not None:
                # A container build file's base image is where the code runs; a document
                # may only suggest one ("any generic PyTorch image should work": LoRA).
                built = _CONTAINER_FILE.match(path.name) and (int(year), int(month)) < _NGC_NATIVE_AMP
                yield (ApexContainerTorch if built else Requirement)(f"torch>={torch[0]}.{torch[1]}")
        yield from _operator_pins(text)
        if _CONDA_CUDATOOLKIT.search(text):
            yield Requirement("torch<=1.12")
        for cuda in _CONDA_PYTORCH_CUDA.findall(text):
            yield Requirement(f"torch<={_PYTORCH_CUDA_NEWEST[cuda]}")
        if _LTS_TORCH.search(text):
            yield Requirement("torch==1.8")
        named = [_minor(found.group(0)) for found in _OLD_PYTHON.finditer(text)]
        if named and not _NEWER_PYTHON_ALLOWED.search(text) and not _NEWER_PYTHON.search(text):
            yield PythonImpliedTorch(f"torch<={_newest_torch_for_python(max(named))}")
        for operator, version in _TABLED_TORCH.findall(text):
            yield Requirement(f"torch{_DOCUMENT_OPERATORS.get(operator, operator) or '>='}{version}")
        if path.suffix == ".sh" or _CONTAINER_FILE.match(path.name):
            continue  # a script's prose is its comments
        for version in (found.group(1) or found.group(2) for found in _AT_LEAST_TORCH.finditer(text)):
            yield Requirement(f"torch>={version}")
        for version in [*_STATED_TORCH.findall(text), *_TORCH_AFTER_VERSION.findall(text)]:
            # "PyTorch 22.11" is an NGC container release (YY.MM), not torch's version.
            if int(version.split(".")[0]) < 10:
                yield Requirement(f"torch>={version}")
    # The install commands of the other documents they link to.
    for path in _other_linked_documents(root):
        text = _read(path)
        yield from _operator_pins("\n".join(line for line in (text or "").splitlines() if _INSTALL_COMMAND.search(line)))


_BUILD_ARGUMENT = re.compile(r"^\s*ARG\s+([A-Za-z_]\w*)\s*=\s*[\"']?([^\s\"']+)", re.MULTILINE)


def _with_build_arguments(text: str) -> str:
    """A container build file with its build arguments' defaults filled in (xview3's
    `ARG PYTORCH="1.10.0"` then `FROM pytorch/pytorch:${PYTORCH}-cuda11.3-cudnn8-devel`)."""
    for name, value in _BUILD_ARGUMENT.findall(text):
        text = re.sub(r"\$\{" + name + r"\}|\$" + name + r"(?!\w)", value.replace("\\", "\\\\"), text)
    return text


def _operator_pins(text: str) -> Iterator[Requirement]:
    """The torch versions ``text`` writes with an operator (`torch==1.8.1`, `pytorch=1.10`)."""
    for operator, version in _DOCUMENTED_TORCH.findall(text):
        yield Requirement(f"torch{_DOCUMENT_OPERATORS.get(operator, operator)}{version}")


def _installed_requirements(root: Path, text: str) -> Iterator[Requirement]:
    """The torch pins of a requirements file a document tells users to install
    (`cd ImageBind; pip install -r requirements.txt`: LLaMA-Adapter's imagebind_LLM)."""
    for path in _listed_requirement_files(root, text):
        lines = _requirements_txt(path) if path.suffix == ".txt" else _conda_environment(path)
        yield from (requirement for requirement in _parsed(lines) if requirement.name.lower() == "torch")


def _listed_requirement_files(root: Path, text: str) -> list[Path]:
    """The requirements files (``.txt``, inside the folder) and conda environments
    (``.yml``/``.yaml``) that a document's commands install: ``pip install -r X``,
    ``conda env create -f X``, after any ``cd`` earlier in the same code block."""
    top = root.resolve()
    listed: list[Path] = []
    directory = top
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            directory = top  # each code block starts in the folder
        for change, requirements, environment in _CD_OR_PIP_INSTALL_R.findall(line):
            if change:
                directory = (directory / change).resolve()
                continue
            path = (directory / (requirements or environment)).resolve()
            suffixes = (".txt",) if requirements else (".yml", ".yaml")
            if top in path.parents and path.suffix in suffixes:
                listed.append(path)
    return listed


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _pyproject(path: Path) -> Iterator[str]:
    text = _read(path)
    if text is None:
        return
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return
    project = document.get("project", {})
    if not isinstance(project, dict):
        return
    yield from _strings(project.get("dependencies", ()))
    optional = project.get("optional-dependencies", {})
    if isinstance(optional, dict):
        for group in optional.values():
            yield from _strings(group)
    yield from _poetry(document)


def _poetry(document: dict[str, object]) -> Iterator[str]:
    """Poetry's dependency tables (``[tool.poetry.dependencies]`` and its groups'), as
    requirements: UniMERNet's ``torch = ">=2.2.2"``; ``^2.1`` and ``~2.1`` admit nothing
    older than 2.1, a bare ``2.1.0`` is that release, ``{version = "..."}`` the same."""
    tool = document.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    if not isinstance(poetry, dict):
        return
    tables = [poetry.get("dependencies"), poetry.get("dev-dependencies")]
    groups = poetry.get("group")
    if isinstance(groups, dict):
        tables.extend(group.get("dependencies") for group in groups.values() if isinstance(group, dict))
    for table in tables:
        if not isinstance(table, dict):
            continue
        for name, constraint in table.items():
            if isinstance(constraint, dict):
                # smly's hotelid: `torch = {url = ".../torch-1.8.0%2Bcu111-cp38-...whl"}`.
                wheel = _TORCH_WHEEL.search(str(constraint.get("url", "")))
                constraint = f"=={wheel.group(1)}" if name == "torch" and wheel is not None else constraint.get("version")
            if isinstance(name, str) and isinstance(constraint, str):
                yield name + _poetry_specifier(constraint)


def _poetry_specifier(constraint: str) -> str:
    """A Poetry version constraint as PEP 440 specifiers, as far as its lower bound goes."""
    parts = []
    for part in constraint.split(","):
        part = part.strip()
        if part.startswith(("^", "~")) and not part.startswith("~="):
            part = ">=" + part.lstrip("^~").strip()
        elif part[:1].isdigit():
            part = "==" + part
        parts.append(part)
    return ",".join(part for part in parts if part and part != "*")


_PIP_LINE_OPTIONS = re.compile(r"\s+(?=--?[a-z])")


def _requirements_txt(path: Path) -> Iterator[str]:
    text = _read(path)
    if text is None:
        return
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        # A requirement's own pip options follow it (`torch==2.0.1 --index-url
        # https://download.pytorch.org/whl/cu118`, thu-ml/ares): the requirement is before.
        line = _PIP_LINE_OPTIONS.split(line, 1)[0]
        wheel = _TORCH_WHEEL.search(line) if not line.startswith("#") else None
        if wheel is not None:
            yield f"torch=={wheel.group(1)}"
        elif line and not line.startswith(("#", "-")):
            # A conda package list (`conda install --file conda-requirements.txt`: matchmaker's
            # `pytorch==1.9.0`, or conda's `pytorch=1.9.0`) names torch `pytorch`, which pip
            # cannot install: the line can only mean torch. Conda's single `=` is no pip
            # operator either: `conda list --export` writes `torch=1.10.0+cu113` (LeafPoseNet's
            # requirements.txt), the exact release.
            conda = _CONDA_TORCH.match(line.split("::")[-1])
            if conda is not None and (conda.group(1) == "pytorch" or conda.group(2) == "="):
                name = "torch" if conda.group(1) == "pytorch" else conda.group(1)
                yield f"{name}{_DOCUMENT_OPERATORS.get(conda.group(2), conda.group(2))}{conda.group(3)}"
            else:
                yield line


def _conda_environment(path: Path) -> Iterator[str]:
    """The list items of a conda environment file (``environment.yml``, or any YAML with
    a top-level ``dependencies:``) that can name torch: conda's
    ``pytorch=2.0.0`` (read as ``torch==2.0.0``) and the ``pip:`` section's requirements.
    Read line by line; the file's other YAML does not matter here."""
    text = _read(path)
    if text is None or not any(line.rstrip() == "dependencies:" for line in text.splitlines()):
        return
    for line in text.splitlines():
        item = line.split(" #", 1)[0].strip()
        if not item.startswith("- "):
            continue
        item = item[2:].strip().strip("'\"").split("::")[-1]  # `pytorch::pytorch=2.5`: the channel goes
        conda = _CONDA_TORCH.match(item)
        cuda_build = _PYTORCH_CUDA.fullmatch(item)
        if conda is not None:
            name = "torch" if conda.group(1) == "pytorch" else conda.group(1)
            yield f"{name}{_DOCUMENT_OPERATORS.get(conda.group(2), conda.group(2))}{conda.group(3)}"
        elif cuda_build is not None:
            yield f"torch<={_PYTORCH_CUDA_NEWEST[cuda_build.group(1)]}"
        elif _looks_like_requirement(item):
            yield item


# A conda environment's own Python, when no newer than 3.7 (OpenCOOD's `- python==3.7.11`).
_CONDA_OLD_PYTHON = re.compile(r"^-\s*['\"]?python\s*(?:==?|<=)\s*3\.[0-7](?:\.[0-9]+)?['\"]?\s*$")


def _conda_python_implied(root: Path) -> Iterator[Requirement]:
    """The newest torch the Python of a folder's conda environment file can run, when that
    Python is 3.7 or older: torch 1.13 was the last release for it. Read only where nothing
    of the folder bounds torch itself."""
    for pattern in _CONDA_FILES:
        for path in sorted(root.glob(pattern)):
            text = _read(path)
            if text is None or not any(line.rstrip() == "dependencies:" for line in text.splitlines()):
                continue
            named = [
                _minor(line) for line in text.splitlines() if _CONDA_OLD_PYTHON.match(line.split(" #", 1)[0].strip())
            ]
            if named:
                yield PythonImpliedTorch(f"torch<={_newest_torch_for_python(max(named))}")
                return


def _cog(path: Path) -> Iterator[str]:
    """The ``python_packages:`` list of a Cog build file (Replicate's ``cog.yaml``:
    Detic pins ``torch==1.8.1`` there), read line by line."""
    text = _read(path)
    if text is None:
        return
    listing = False
    for line in text.splitlines():
        stripped = line.split(" #", 1)[0].strip()
        if stripped.endswith(":"):
            listing = stripped == "python_packages:"
        elif listing and stripped.startswith("- "):
            item = stripped[2:].strip().strip("'\"")
            if _looks_like_requirement(item):
                yield item
        elif stripped and not stripped.startswith("#"):
            listing = False


def _setup_cfg(path: Path) -> Iterator[str]:
    text = _read(path)
    if text is None:
        return
    parser = configparser.ConfigParser()
    try:
        parser.read_string(text)
    except configparser.Error:
        return
    if parser.has_option("options", "install_requires"):
        yield from (line.strip() for line in parser.get("options", "install_requires").splitlines() if line.strip())
    if parser.has_section("options.extras_require"):
        for _, value in parser.items("options.extras_require"):
            yield from (line.strip() for line in value.splitlines() if line.strip())


def _setup_py(path: Path) -> Iterator[str]:
    """String literals in ``install_requires=[...]`` / ``extras_require={...}`` of a
    ``setup(...)`` call (read, never run)."""
    text = _read(path)
    if text is None:
        return
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return
    # `REQUIRED_PACKAGES = [...]` then `install_requires=REQUIRED_PACKAGES` (sam2).
    lists = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple, ast.Dict))
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("install_requires", "extras_require"):
            value = lists.get(node.value.id, node.value) if isinstance(node.value, ast.Name) else node.value
            # The extras' names (`{"torch": ["torch==1.13.1"]}`, ColBERT) are no requirements.
            keys = {id(key) for dict_node in ast.walk(value) if isinstance(dict_node, ast.Dict) for key in dict_node.keys}
            for constant in ast.walk(value):
                if (
                    isinstance(constant, ast.Constant)
                    and isinstance(constant.value, str)
                    and id(constant) not in keys
                    and _looks_like_requirement(constant.value)
                ):
                    yield constant.value


_NAME_START = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")


def _looks_like_requirement(text: str) -> bool:
    return bool(_NAME_START.match(text.strip()))


def _strings(values: object) -> Iterable[str]:
    return [value for value in values if isinstance(value, str)] if isinstance(values, list) else []
