"""The projection model's formulas on cases whose answers are known by hand (python3 -m unittest)."""
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import projection_model as model  # noqa: E402


def machine(**overrides):
    base = dict(ranks_per_node=1, link=1e9, alpha=0.0, overhead=0.0, intra_busbw=1e10, encode=1e9, decode=2e9,
                reduce=1e12)
    base.update(overrides)
    return model.Machine(**base)


class WireRatio(unittest.TestCase):
    def test_matches_the_wire_format(self):
        self.assertAlmostEqual(model.wire_ratio(1), 72 / 2048)   # 8 header bytes + 16 words per 512 floats
        self.assertAlmostEqual(model.wire_ratio(8), 520 / 2048)
        self.assertEqual(model.wire_ratio(32), 1.0)


class Gradagg(unittest.TestCase):
    def test_one_node_is_the_intra_node_phases_only(self):
        m = machine(ranks_per_node=4)
        phases = model.gradagg(m, 1, 4e9, 1)
        self.assertAlmostEqual(phases["total"], 2 * 0.75 * 4e9 / 1e10)
        self.assertEqual(phases["exchange"], 0.0)

    def test_two_nodes_one_rank_each_by_hand(self):
        # stripe 1 GB, part 0.5 GB: quantize 1.5 s, decode 1 s, exchange 2 x 0.5 GB x r / 1 GB/s.
        phases = model.gradagg(machine(), 2, 1e9, 1)
        self.assertAlmostEqual(phases["quantize"], 1.5)
        self.assertAlmostEqual(phases["decode"], 1.0)
        self.assertAlmostEqual(phases["exchange"], 2 * 0.5 * model.wire_ratio(1))

    def test_message_cost_grows_with_nodes_while_bytes_do_not(self):
        m = machine(overhead=1e-6)
        small = model.gradagg(m, 16, 1e8, 1)["exchange"]
        large = model.gradagg(m, 1024, 1e8, 1)["exchange"]
        self.assertGreater(large - small, 2 * 2 * (1023 - 15) * 1e-6 * 0.99)

    def test_two_level_phase_2_sends_fewer_messages_at_scale(self):
        m = machine(overhead=1e-6, link=5e10, encode=1e12, decode=1e12)
        self.assertLess(model.gradagg_two_level(m, 1024, 1e8, 1)["exchange"], model.gradagg(m, 1024, 1e8, 1)["exchange"])


class Ring(unittest.TestCase):
    def test_by_hand(self):
        self.assertEqual(model.ring(machine(), 1, 1e9), 0.0)
        self.assertAlmostEqual(model.ring(machine(reduce=math.inf), 4, 1e9), 2 * 0.75 * 1e9 / 1e9)


class Calibration(unittest.TestCase):
    def test_least_squares_recovers_exact_coefficients(self):
        rows = [([x, 1.0], 3 * x + 2) for x in (1.0, 2.0, 5.0)]
        slope, intercept = model.least_squares(rows)
        self.assertAlmostEqual(slope, 3.0)
        self.assertAlmostEqual(intercept, 2.0)

    def test_rates(self):
        self.assertEqual(model.rate_bytes("1gbit"), 1.25e8)
        self.assertEqual(model.rate_bytes("100mbit"), 1.25e7)
        with self.assertRaises(ValueError):
            model.rate_bytes("fast")


if __name__ == "__main__":
    unittest.main()
