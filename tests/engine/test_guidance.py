"""What a correction's replay takes for a decision (engine/correct/guidance.py): the alternatives of
the decision's own point, read as the scripted reasoner reads the guidance — and nothing
for a decision a chat model made."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.engine.correct.guidance import alternatives
from cleveragents_tui.engine.setup.actions import load_action

DEMO = Path(__file__).parents[2] / "assets" / "demo" / "add-greeting.action.yaml"
FUNCTION = "hello_cli/greet.py with a hello() function"
PLAIN = "A plain function registered in COMMANDS"
STRATEGY_ID = new_ulid()
CURRENT = {"strategy": (STRATEGY_ID, PLAIN)}


@pytest.fixture
def action(tmp_path: Path) -> Action:
    text = DEMO.read_text().replace("@NS@", "demo-x").replace("@PYTHON@", "python3")
    (tmp_path / "a.action.yaml").write_text(text)
    return load_action(str(tmp_path / "a.action.yaml"))


def decision(key: str | None, chosen: str, **fields: Any) -> Decision:
    return Decision(
        plan_id=new_ulid(),
        parent_decision_id=new_ulid(),
        sequence_number=4,
        decision_type=fields.pop("decision_type", "implementation_choice"),
        question="How is the hello command written?",
        chosen_option=chosen,
        step_key=key,
        **fields,
    )


def test_a_word_every_alternative_shares_selects_nothing(action: Action) -> None:
    """'hello_cli' is in the one alternative's text: it selected it before (issue 14, 3)."""
    made = decision("implement-function", FUNCTION)
    found = alternatives(action, made, "use a Greeter class in hello_cli/greeter.py", CURRENT)
    assert found is not None
    assert (found.options, found.selected, found.fallback) == ((FUNCTION,), None, 1)
    [elsewhere] = found.elsewhere  # the strategy chooses between function and class
    assert (elsewhere.decision_id, elsewhere.key) == (STRATEGY_ID, "strategy")
    assert elsewhere.option == "A greeter class with a configurable greeting"


def test_choose_names_an_alternative_and_a_number_out_of_range_is_refused(
    action: Action,
) -> None:
    made = decision("strategy", PLAIN, decision_type="strategy_choice")
    found = alternatives(action, made, "make it better", CURRENT, choose=2)
    assert found is not None and found.chosen
    assert found.option == "A greeter class with a configurable greeting"
    with pytest.raises(UserError, match="there is no alternative 3: step strategy has 2"):
        alternatives(action, made, "make it better", CURRENT, choose=3)


def test_a_decision_the_scripted_reasoner_did_not_make_has_no_alternatives(
    action: Action,
) -> None:
    """A chat model's choice at a point's key (its text is not an alternative), a key that is
    no point, another actor: the model reads the guidance itself; nothing is refused."""
    chat = decision("implement-function", "write hello() in greet.py with type hints")
    assert alternatives(action, chat, "use a class", CURRENT) is None
    assert alternatives(action, decision("layout", "one README"), "x", CURRENT) is None
    other = action.model_copy(
        update={"actors": action.actors.model_copy(update={"execution": "local/chat"})}
    )
    assert alternatives(other, decision("implement-function", FUNCTION), "x", CURRENT) is None
    with pytest.raises(UserError, match="not made by the scripted reasoner"):
        alternatives(action, chat, "use a class", CURRENT, choose=1)
