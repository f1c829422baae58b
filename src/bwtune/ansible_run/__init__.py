"""The Ansible layer: playbooks run through ansible-runner, their events, the inventory.

Named `ansible_run`, not `ansible`: `from bwtune import ansible` would read as ansible-core
(which the controller imports too: `bwtune.app.playbook_args`), and a tool that puts
src/bwtune on sys.path would have it shadow ansible-core.

Callers use the names here (`ansible_run.run_playbook(...)`), so a test replaces one in
one place. Below the application layer and the commands: it imports neither.
"""

from bwtune.ansible_run.console_scripts import bwtune_bin
from bwtune.ansible_run.events import HostFailure, PlaybookRun, RunnerEvent
from bwtune.ansible_run.inventory import Inventory, InventoryError, load_inventory
from bwtune.ansible_run.playbooks import ArtifactWriteError, run_playbook
from bwtune.ansible_run.run_dirs import new_run_id, private_data_dir
from bwtune.ansible_run.stopping import CancelOnInterrupt, cancel_on_interrupt

__all__ = [
    "ArtifactWriteError",
    "CancelOnInterrupt",
    "HostFailure",
    "Inventory",
    "InventoryError",
    "PlaybookRun",
    "RunnerEvent",
    "bwtune_bin",
    "cancel_on_interrupt",
    "load_inventory",
    "new_run_id",
    "private_data_dir",
    "run_playbook",
]
