import unittest

from hello_cli.app import main


class AppTest(unittest.TestCase):
    def test_unknown_command_is_refused(self) -> None:
        self.assertEqual(main(["nope"]), 2)


if __name__ == "__main__":
    unittest.main()
