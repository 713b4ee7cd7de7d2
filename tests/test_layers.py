"""The house's layers: the chain driver (``chefs.mcmc``) builds a run's model by the
name in its spec, through the builders the models register, and imports nothing
from ``chefs.models`` itself."""

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np

MCMC = Path(__file__).resolve().parents[1] / "src" / "chefs" / "mcmc"


def test_mcmc_imports_nothing_from_models():
    """Static: no ``from ..models`` (or ``chefs.models``) anywhere in chefs.mcmc, at
    module level or inside functions. Control: the check sees such an import."""
    def upward(path_or_src):
        tree = ast.parse(path_or_src)
        bad = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if (node.level >= 2 and (mod == "models" or mod.startswith("models."))) or mod.startswith("chefs.models"):
                    bad.append(mod)
                if node.level >= 2 and not mod and any(a.name == "models" for a in node.names):
                    bad.append("..models")
            elif isinstance(node, ast.Import) and any(a.name.startswith("chefs.models") for a in node.names):
                bad.append("chefs.models")
        return bad

    assert upward("def f():\n    from ..models.nlgbn import NLGBN\n") == ["models.nlgbn"]  # the control
    assert upward("from .. import models\n") == ["..models"]
    offenders = {p.name: upward(p.read_text()) for p in sorted(MCMC.glob("*.py"))}
    assert not {k: v for k, v in offenders.items() if v}, offenders


def test_a_fresh_process_builds_the_model_from_the_spec_alone(tmp_path):
    """A worker that imports only the chain driver (as one resuming a chain does)
    gets the NLGBN from a spec naming "nlgbn": the models package registers it on
    first use. An unknown name is a one-line ValueError that lists the known ones."""
    np.save(tmp_path / "train01.npy", np.full((5, 2), 0.5))
    code = f"""
import sys
import numpy as np
from chefs.mcmc.run import make_model
from chefs.mcmc.chain import ChainConfig, init_state
assert "chefs.models" not in sys.modules, "the chain driver imported the models"
state = init_state(ChainConfig(2, 0.0, 1.0, 1.0, 1.0), np.random.default_rng(0))
model = make_model({{"name": "nlgbn", "data": "train01.npy", "num_tries": 3}}, {str(tmp_path)!r}, state)
print(type(model).__module__, type(model).__name__, model.num_tries if hasattr(model, "num_tries") else "")
try:
    make_model({{"name": "nope"}}, {str(tmp_path)!r}, state)
except ValueError as err:
    print(err)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].startswith("chefs.models.nlgbn NLGBN")
    assert out[1] == "unknown model 'nope' (known: null, nlgbn)"
