"""test/layering/check_layers.py on small trees: a clean one passes, and includes planted up or sideways are caught."""
import importlib.util
import os
import tempfile
import unittest

_path = os.path.join(os.path.dirname(__file__), "check_layers.py")
_spec = importlib.util.spec_from_file_location("check_layers", _path)
check_layers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_layers)


def tree(files):
    root = tempfile.mkdtemp()
    for name, text in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    return root


CLEAN = {
    "include/gradagg/errors.h": "#pragma once\n",
    "common/element_type.h": "#pragma once\n",
    "quantize/quantizer.h": '#include "common/element_type.h"\n#include "gradagg/errors.h"\n',
    "mpi/exchange.h": '#include "gradagg/errors.h"\n#include <mpi.h>\n',
    "intra_node/phase.h": '#include "mpi/exchange.h"\n#include "local_helper.h"\n',
    "include/gradagg/aggregator.h": '#include "gradagg/errors.h"\n',
    "aggregator/run.cc": '#include "intra_node/phase.h"\n#include "quantize/quantizer.h"\n#include "gradagg/aggregator.h"\n',
    "apps/main.cc": '#include "aggregator/run.h"\n',
    "test/anything.cc": '#include "apps/main.h"\n',
}


class CheckLayersTest(unittest.TestCase):
    def test_a_clean_tree_passes(self):
        self.assertEqual(check_layers.violations(tree(CLEAN)), [])

    def test_includes_up_and_sideways_are_named(self):
        files = dict(CLEAN)
        files["mpi/exchange.h"] += '#include "quantize/quantizer.h"\n'      # sideways
        files["include/gradagg/aggregator.h"] += '#include "aggregator/run.h"\n'   # the public API reaching in
        files["common/element_type.h"] += '#include "mpi/exchange.h"\n'    # the vocabulary reaching up
        found = check_layers.violations(tree(files))
        self.assertEqual(len(found), 3, found)
        self.assertTrue(any(line.startswith("mpi/exchange.h:3:") and "of quantize/" in line for line in found))
        self.assertTrue(any(line.startswith("include/gradagg/aggregator.h:2:") and "of aggregator/" in line
                            for line in found))
        self.assertTrue(any(line.startswith("common/element_type.h:2:") for line in found))

    def test_main_exits_one_on_a_violation(self):
        files = dict(CLEAN)
        files["quantize/quantizer.h"] += '#include "intra_node/phase.h"\n'
        self.assertEqual(check_layers.main(["check_layers.py", tree(files)]), 1)
        self.assertEqual(check_layers.main(["check_layers.py", tree(CLEAN)]), 0)


PYTHON = {
    "python/gradagg/__init__.py": "from .aggregator import Aggregator\n",
    "python/gradagg/aggregator.py": "import ctypes\n",
    "python/gradagg/torch_adam.py": "from .torch.adamw import AdamW  # the older path\n",
    "python/gradagg/torch/__init__.py": "from .ddp_hook import comm_hook\nfrom .adamw import AdamW\n",
    "python/gradagg/torch/ddp_hook.py": '"""Usage:\n\n    import gradagg.torch\n"""\nfrom . import common\n',
    "python/gradagg/torch/adamw.py": "import gradagg\nfrom .common import shared\n",
    "python/gradagg/torch/common.py": "import torch\n",
}


class CheckPythonTest(unittest.TestCase):
    def test_a_clean_package_passes(self):
        self.assertEqual(check_layers.python_violations(tree(PYTHON)), [])

    def test_the_core_reaching_torch_a_circle_and_the_front_are_named(self):
        files = dict(PYTHON)
        files["python/gradagg/aggregator.py"] += "from gradagg.torch.common import shared\n"   # the core reaching up
        files["python/gradagg/torch/common.py"] += "from . import ddp_hook\n"                  # a circle
        files["python/gradagg/torch/adamw.py"] += "from gradagg.torch import comm_hook\n"       # through the front
        found = check_layers.python_violations(tree(files))
        self.assertEqual(len(found), 4, found)  # each module on the circle is named
        self.assertTrue(any(line.startswith("python/gradagg/aggregator.py:2:") for line in found), found)
        self.assertEqual(sorted(line.split(":")[0] for line in found if "a circle" in line),
                         ["python/gradagg/torch/common.py", "python/gradagg/torch/ddp_hook.py"])
        self.assertTrue(any(line.startswith("python/gradagg/torch/adamw.py:3:") and "front" in line for line in found))

    def test_imports_are_read_as_python_reads_them(self):
        files = dict(PYTHON)
        # Clean: an import split over lines, names resolved one by one, a module whose name only begins alike.
        files["python/gradagg/torch/adamw.py"] += "from . import (\n    common,\n)\n"
        files["python/gradagg/torch/ddp_hook.py"] += "from .. import aggregator, Aggregator\n"
        files["python/gradagg/aggregator.py"] += "import gradagg.torch_adam\n"
        self.assertEqual(check_layers.python_violations(tree(files)), [])
        # The core reaching up from the second name of one import, and from a second line.
        files["python/gradagg/aggregator.py"] += ("import os, gradagg.torch\n"
                                                  "from gradagg.torch.common import (\n    shared)\n")
        found = check_layers.python_violations(tree(files))
        self.assertEqual(sorted(line.split(": ")[0] for line in found),
                         ["python/gradagg/aggregator.py:3", "python/gradagg/aggregator.py:4"], found)


if __name__ == "__main__":
    unittest.main()
