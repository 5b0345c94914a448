"""A local ``tokenizer.json`` and its chat template: loading, the template from
``tokenizer_config.json``, and rendering a conversation with it.
"""

from __future__ import annotations

import functools
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from eagle3_forensics.errors import UnusableInputError, error_line

TOKENIZER_FILE = "tokenizer.json"


def load_tokenizer(tokenizer_dir: str | Path) -> Any:
    """A ``tokenizers.Tokenizer`` from ``tokenizer_dir/tokenizer.json`` (fast: no transformers import)."""
    d = Path(tokenizer_dir)
    f = d if d.is_file() else d / TOKENIZER_FILE
    if not f.is_file():
        extra = (
            " (only a SentencePiece tokenizer.model: convert it to tokenizer.json with transformers)"
            if (d / "tokenizer.model").is_file()
            else ""
        )
        raise UnusableInputError(f"no tokenizer: {f} not found{extra}", path=str(f))
    from tokenizers import Tokenizer  # optional: tokenizers (the models extra)

    try:
        return Tokenizer.from_file(str(f))
    except Exception as exc:
        raise UnusableInputError(f"unreadable tokenizer {f}: {error_line(exc)}", path=str(f)) from None


def read_tokenizer_config(tokenizer_dir: str | Path) -> dict[str, Any]:
    f = Path(tokenizer_dir) / "tokenizer_config.json"
    if not f.is_file():
        return {}
    try:
        cfg = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UnusableInputError(f"unreadable {f}: {error_line(exc)}", path=str(f)) from None
    return cfg if isinstance(cfg, dict) else {}


def token_text(value: Any) -> str | None:
    """A special token as tokenizer configs state it: a string or an ``AddedToken`` dict's ``content``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def read_chat_template(tokenizer_dir: str | Path) -> str | None:
    """The chat template shipped with a tokenizer: ``chat_template.jinja`` or ``tokenizer_config.json``."""
    d = Path(tokenizer_dir)
    if (d / "chat_template.jinja").is_file():
        return (d / "chat_template.jinja").read_text(encoding="utf-8")
    template = read_tokenizer_config(d).get("chat_template")
    if isinstance(template, list):  # named templates: take "default"
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    if template is None and (d / "chat_template.json").is_file():
        try:
            template = json.loads((d / "chat_template.json").read_text(encoding="utf-8")).get("chat_template")
        except (OSError, json.JSONDecodeError, AttributeError):
            template = None
    return template if isinstance(template, str) else None


@functools.lru_cache(maxsize=16)
def compiled_template(template: str) -> Any:
    """``template`` compiled once per process (as ``transformers`` caches it): one conversation renders
    in microseconds, while compiling costs milliseconds, and the checks render hundreds."""
    try:
        import jinja2  # optional: jinja2 (chat templates)
        from jinja2.ext import loopcontrols  # optional: jinja2 (chat templates)
        from jinja2.sandbox import ImmutableSandboxedEnvironment  # optional: jinja2 (chat templates)
    except ImportError:
        raise UnusableInputError("rendering a chat template needs jinja2 (pip install jinja2)") from None

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(
        x: Any,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: Any = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    # local time on purpose: the templates date a conversation as the serving host would
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)  # noqa: DTZ005
    try:
        return env.from_string(template)
    except jinja2.exceptions.TemplateError as exc:
        raise UnusableInputError(f"the chat template failed: {error_line(exc)}") from None


def render_chat(
    template: str,
    messages: list[dict[str, str]],
    special: dict[str, str | None],
    *,
    add_generation_prompt: bool = False,
    template_kwargs: dict[str, Any] | None = None,
) -> str:
    """Render ``messages`` the way ``transformers``' ``apply_chat_template(tokenize=False)`` does
    (sandboxed Jinja, ``trim_blocks``/``lstrip_blocks``, ``raise_exception``, ``strftime_now``).

    ``template_kwargs`` are the extra variables a server passes (vLLM/SGLang
    ``chat_template_kwargs``, e.g. ``{"enable_thinking": false}``)."""
    compiled = compiled_template(template)
    import jinja2  # optional: jinja2 (chat templates); compiled_template said so if it is missing

    try:
        variables = {**special, **(template_kwargs or {})}
        return str(
            compiled.render(messages=messages, add_generation_prompt=add_generation_prompt, **variables)
        )
    except jinja2.exceptions.TemplateError as exc:
        raise UnusableInputError(f"the chat template failed: {error_line(exc)}") from None
