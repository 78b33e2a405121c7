"""The one row action button (console/core/templatetags/row_tags.py)."""

from __future__ import annotations

from django.template import Context, Template


def render(snippet: str, **values) -> str:
    return Template("{% load row_tags %}" + snippet).render(Context(values))


def test_a_row_button_names_its_action_and_says_what_it_acts_on():
    text = render('{% row_button "freeze" "Freeze" "queue" 3 %}')

    assert text == (
        '<button type="submit" name="action" value="freeze" class="tm-button-small">'
        'Freeze<span class="tm-visually-hidden"> queue 3</span></button>'
    )


def test_a_dangerous_button_asks_first_and_escapes_what_it_shows():
    text = render(
        '{% with q="Delete the alert rule "|add:name|add:"?" %}'
        '{% row_button "delete" "Delete" name danger=True confirm=q %}{% endwith %}',
        name='<b>"lag"</b>',
    )

    assert 'class="tm-button-small tm-button-danger"' in text
    assert 'data-confirm="Delete the alert rule &lt;b&gt;&quot;lag&quot;&lt;/b&gt;?"' in text
    assert "> &lt;b&gt;&quot;lag&quot;&lt;/b&gt;</span>" in text
    assert "<b>" not in text


def test_a_forms_only_button_has_no_action_name():
    text = render('{% row_button "" "Revoke" "token" "ci" describedby="help" after="…" %}')

    assert 'name="action"' not in text
    assert 'aria-describedby="help"' in text
    assert text.endswith("</span>…</button>")
