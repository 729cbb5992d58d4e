"""How one engine kind gets onto a machine: what set-up installs, by which step and make target,
where the installed executable lives, and the sentence that tells a user how to install it.
Class-level only: set-up asks a kind about its install without launching anything."""
from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from stackbook.locations import symbolic


class InstallRecipe:
    """The install side of an adapter. A kind with a `bootstrap_step` implements `is_installed`
    and `install(ctx)`; one without (a GPU image, a managed service) is installed some other way."""
    installs: ClassVar[str] = ""  # what to install, in words
    bootstrap_step: ClassVar[str | None] = None  # the tools/bootstrap.sh step for kinds set-up installs
    setup_target: ClassVar[str] = "quickstart"  # the make target whose set-up runs bootstrap_step
    pinned_version: ClassVar[str | None] = None
    install_label: ClassVar[str] = ""  # how set-up's progress line names this kind's install
    builds_from_source: ClassVar[bool] = False  # its install needs a C++ compiler, cmake and make
    kind: ClassVar[str]

    @classmethod
    def installed_executable(cls) -> Path | None:
        """What tools/bootstrap.sh puts in the cache to launch this kind; None when the kind
        is installed some other way (a GPU image, a managed service)."""
        return None

    @classmethod
    def install_hint(cls) -> str:
        """The sentence that tells a user how to install this kind."""
        if cls.bootstrap_step is None:
            return f"{cls.kind}: install {cls.installs}"
        return (f"{symbolic(cls.installed_executable())} is missing; run `make {cls.setup_target}` (or "
                f"tools/bootstrap.sh {cls.bootstrap_step}) to install {cls.installs}")

    @classmethod
    def is_installed(cls) -> bool:
        """Whether set-up has installed this kind here (a kind set-up does not install: never)."""
        return False

    @classmethod
    def install(cls, ctx) -> None:
        """Install this kind into the cache (set-up's step for it)."""
        raise NotImplementedError(f"{cls.kind} is not installed by set-up: {cls.install_hint()}")
