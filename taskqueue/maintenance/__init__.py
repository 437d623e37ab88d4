"""Self-maintenance run by one worker at a time: rescue of expired leases, pruning."""

from .leader import Leader, leader_key
from .maintainer import Maintainer
from .pruner import Pruner
from .rescuer import Rescuer

__all__ = ["Leader", "Maintainer", "Pruner", "Rescuer", "leader_key"]
