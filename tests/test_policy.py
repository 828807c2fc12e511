"""The policy over acts: globs, verdicts, the builder, bounds, JSON and TOML."""

from __future__ import annotations

import functools
import ipaddress
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from io_harness.errors import ConfigError
from io_harness.policy import Act, Effect, Layer, Policy, Rule, Verdict, normalise_target
from io_harness.policy._glob import match_glob
from io_harness.policy._hosts import canonical_host, host_problem
from support import app_policy as example_policy

PROPERTY = settings(max_examples=200, derandomize=True, deadline=None)


def effect(policy: Policy, act: Act | str, target: str) -> Effect:
    return policy.explain(act, target).effect


def allows(glob: str, act: Act, target: str) -> bool:
    return Rule(act=act, glob=glob, effect=Effect.ALLOW).matches(target)


# The example from the issue


def test_the_builder_example_allows_writes_under_src() -> None:
    verdict = example_policy().explain("write", "src/app.py")
    assert verdict.effect is Effect.ALLOW
    assert verdict.rule == Rule(act=Act.WRITE, glob="src/*", effect=Effect.ALLOW)
    assert verdict.layer == "app"


def test_the_builder_example_denies_reading_secrets_though_it_allows_reading_everything() -> None:
    assert effect(example_policy(), Act.READ, "secrets/token.txt") is Effect.DENY
    assert effect(example_policy(), Act.READ, "README.md") is Effect.ALLOW


def test_the_builder_example_denies_an_env_file_at_any_depth_by_the_builtin_layer() -> None:
    verdict = example_policy().explain(Act.READ, "config/deploy/.env")
    assert verdict.effect is Effect.DENY
    assert verdict.layer == "builtin-secrets"


def test_the_builder_example_asks_before_running_python_and_denies_the_network() -> None:
    policy = example_policy()
    assert effect(policy, Act.EXEC, "python") is Effect.ASK
    assert effect(policy, Act.EXEC, "/usr/bin/python") is Effect.ASK
    assert effect(policy, Act.NET, "example.com:443") is Effect.DENY


def test_a_write_outside_src_falls_to_the_default_ask() -> None:
    verdict = example_policy().explain(Act.WRITE, "docs/index.md")
    assert (verdict.effect, verdict.rule, verdict.layer) == (Effect.ASK, None, None)


# Verdicts


@pytest.mark.parametrize("order", [("a", "b", "c"), ("c", "b", "a"), ("b", "c", "a")])
def test_deny_beats_ask_beats_allow_whatever_the_layer_order(order: tuple[str, ...]) -> None:
    build = {
        "a": lambda p: p.layer("allows").allow_write("*"),
        "b": lambda p: p.layer("asks").ask_write("*.py"),
        "c": lambda p: p.layer("denies").deny_write("secret.py"),
    }
    policy = Policy.permissive()
    for name in order:
        policy = build[name](policy)
    assert effect(policy, Act.WRITE, "secret.py") is Effect.DENY
    assert effect(policy, Act.WRITE, "main.py") is Effect.ASK
    assert effect(policy, Act.WRITE, "notes.txt") is Effect.ALLOW


def test_within_one_effect_the_first_layer_and_rule_are_named() -> None:
    policy = Policy.permissive().layer("one").deny_net("a.com", "*").layer("two").deny_net("a.com")
    verdict = policy.explain(Act.NET, "a.com")
    assert verdict.rule == Rule(act=Act.NET, glob="a.com", effect=Effect.DENY)
    assert verdict.layer == "one"


def test_a_verdict_describes_its_rule_and_layer_in_one_line() -> None:
    policy = Policy.permissive().layer("app").ask_write("*")
    assert (
        policy.explain("write", "./src/x.py").describe()
        == "write src/x.py: ask (rule 'ask write *' in layer 'app')"
    )
    assert (
        Policy.guarded().explain("net", "Example.COM:443").describe()
        == "net example.com:443: deny (the default for net)"
    )


def test_a_verdict_reports_the_normalised_target() -> None:
    verdict = Policy.guarded().explain(Act.WRITE, "src\\pkg\\..\\app.py")
    assert verdict == Verdict(act=Act.WRITE, target="src/app.py", effect=Effect.ASK)


def test_the_guarded_policy_reads_freely_asks_to_write_and_run_and_denies_the_network() -> None:
    assert Policy.guarded().defaults == {
        Act.READ: Effect.ALLOW,
        Act.WRITE: Effect.ASK,
        Act.EXEC: Effect.ASK,
        Act.NET: Effect.DENY,
    }


@pytest.mark.parametrize(
    "secret", [".env", "a/b/c.pem", "deep/server.key", "id_rsa", "h/id_ed25519"]
)
def test_the_guarded_policy_denies_reading_and_writing_secrets(secret: str) -> None:
    assert effect(Policy.guarded(), Act.READ, secret) is Effect.DENY
    assert effect(Policy.guarded(), Act.WRITE, secret) is Effect.DENY


def test_the_permissive_policy_allows_every_act() -> None:
    policy = Policy.permissive()
    assert policy.layers == ()
    assert {effect(policy, act, "x") for act in Act} == {Effect.ALLOW}


def test_the_default_policy_allows_every_act_but_the_network() -> None:
    policy = Policy.default()
    assert policy.layers == ()
    assert {act: effect(policy, act, "x") for act in Act} == {
        Act.READ: Effect.ALLOW,
        Act.WRITE: Effect.ALLOW,
        Act.EXEC: Effect.ALLOW,
        Act.NET: Effect.DENY,
    }


def test_a_layer_of_yours_cannot_take_the_provider_layers_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'provider' is the name of the layer a run adds"):
        Policy.default().layer("provider")
    path = write_toml(tmp_path, "[policy.layers.provider]\nallow_net = ['x']\n")
    with pytest.raises(ConfigError, match=r"policy\.layers\.provider: the name of the layer a run"):
        Policy.from_toml(path)


def test_an_unknown_act_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="expected one of read, write, exec, net, not 'tool'"):
        Policy.guarded().explain("tool", "x")


def test_effects_are_ordered_allow_ask_deny() -> None:
    assert [e.strictness for e in (Effect.ALLOW, Effect.ASK, Effect.DENY)] == [0, 1, 2]
    assert Effect.stricter(Effect.ASK, Effect.ALLOW) is Effect.ASK
    assert Effect.stricter(Effect.ASK, Effect.DENY) is Effect.DENY


def test_a_rule_prints_as_effect_act_glob() -> None:
    assert str(Rule(act=Act.WRITE, glob="secrets/*", effect=Effect.DENY)) == "deny write secrets/*"


def test_a_rule_with_an_empty_glob_or_a_nul_names_the_field() -> None:
    with pytest.raises(ConfigError, match=r"Rule: glob: .*empty"):
        Rule(act=Act.READ, glob="", effect=Effect.DENY)
    with pytest.raises(ConfigError, match=r"Rule: glob: .*NUL"):
        Rule(act=Act.READ, glob="a\0b", effect=Effect.DENY)


def test_a_policy_without_a_default_for_every_act_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"defaults: .*missing: exec, net"):
        Policy(defaults={Act.READ: Effect.ALLOW, Act.WRITE: Effect.ASK})


def test_a_policy_with_two_layers_of_one_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"layers: .*repeated: app"):
        Policy(layers=(Layer(name="app"), Layer(name="app")), defaults=dict.fromkeys(Act, "ask"))


# Globs and targets


@pytest.mark.parametrize(
    ("glob", "target", "matched"),
    [
        ("src/*", "src/a/b/c.py", True),  # * crosses /
        ("*", "a/b", True),
        ("src/*.py", "src/pkg/x.py", True),
        ("file?.txt", "file1.txt", True),
        ("file?.txt", "file12.txt", False),
        ("file?.txt", "file.txt", False),
        ("src", "src/x.py", False),  # anchored at the end
        ("x.py", "src/x.pyc", False),
        ("*.py", "x.pyc", False),
        ("a.c", "abc", False),  # . is literal
        ("a+b", "a+b", True),
        ("a+b", "aab", False),
        ("f(1)", "f(1)", True),
        ("[ab]", "a", False),  # no classes
        ("[ab]", "[ab]", True),
        ("^a$", "^a$", True),
        ("Src/*", "src/x", False),  # paths are case-sensitive
    ],
)
def test_path_globs_match_whole_paths_with_only_star_and_question_mark(
    glob: str, target: str, matched: bool
) -> None:
    assert allows(glob, Act.READ, target) is matched


def test_a_path_glob_also_matches_the_last_part_of_the_path() -> None:
    assert allows(".env", Act.WRITE, "a/b/.env")
    assert allows("*.pem", Act.READ, "a/b/c.pem")
    assert not allows("b/.env", Act.READ, "a/b/c/.env")


def test_an_exec_glob_matches_the_program_or_its_file_name() -> None:
    assert allows("python3", Act.EXEC, "/usr/bin/python3")
    assert allows("/usr/bin/*", Act.EXEC, "/usr/bin/python3")
    assert allows("python*", Act.EXEC, "python3.12")
    assert not allows("python", Act.EXEC, "/usr/bin/python3")
    assert not allows("Python3", Act.EXEC, "python3")


def test_a_program_named_by_a_relative_path_is_allowed_only_by_its_whole_path() -> None:
    # A file the agent made in the workspace is not the program an allow rule names...
    policy = Policy.guarded().layer("app").allow_exec("git", "./tools/*").deny_exec("rm")
    assert policy.explain(Act.EXEC, "./git").effect is Effect.ASK
    assert policy.explain(Act.EXEC, "sub/git").effect is Effect.ASK
    assert policy.explain(Act.EXEC, "./tools/lint").effect is Effect.ALLOW
    assert policy.explain(Act.EXEC, "/usr/bin/git").effect is Effect.ALLOW
    # ...but a deny of a name still reaches any file of that name.
    assert policy.explain(Act.EXEC, "./rm").effect is Effect.DENY


@pytest.mark.parametrize(
    ("glob", "target", "matched"),
    [
        ("example.com", "example.com:443", True),
        ("example.com:443", "example.com:443", True),
        ("example.com:80", "example.com:443", False),
        ("*.example.com", "api.example.com", True),
        ("*.example.com", "a.b.example.com:443", True),
        ("*.example.com", "example.com", False),
        ("*.example.com", "badexample.com", False),
        ("Example.COM", "EXAMPLE.com:8080", True),
        ("::1", "[::1]:8080", True),
        ("[::1]", "[::1]:8080", True),
        ("[::1]:*", "[::1]:8080", True),
        ("*:22", "host:22", True),
        # A rule's host is taken in its canonical spelling, as targets are.
        ("0x7f.0.0.1", "127.0.0.1:80", True),
        ("2130706433:22", "127.0.0.1:22", True),
        ("0x7f.0.0.1:22", "127.0.0.1:23", False),
        ("::1", "[0:0::1]:8080", True),
        ("[::1]", "::1", True),
        ("[::ffff:127.0.0.1]:*", "127.0.0.1:22", True),
        ("0.0.0.0:8000", "127.0.0.1:8000", True),
        ("LOCALHOST.", "localhost:80", True),
        ("bücher.de", "xn--bcher-kva.de:443", True),
        # A host with a wildcard is matched as written, so it names addresses as dotted quads.
        ("127.*", "[::ffff:127.9.9.9]:80", True),
        ("127.*", "0x7f.1:80", True),
        ("*.Example.COM.", "api.example.com.:443", True),
        ("*.bücher.de", "shop.xn--bcher-kva.de", True),
        ("0x7f.*", "0x7f.0.0.1", False),
    ],
)
def test_net_globs_match_host_port_or_the_bare_host_in_any_case(
    glob: str, target: str, matched: bool
) -> None:
    assert allows(glob, Act.NET, target) is matched


@pytest.mark.parametrize(
    ("act", "target", "normal"),
    [
        (Act.READ, "./src/x.py", "src/x.py"),
        (Act.WRITE, "src\\pkg\\x.py", "src/pkg/x.py"),
        (Act.READ, "a/./b/../c", "a/c"),
        (Act.READ, "a//b/", "a/b"),
        (Act.READ, "//etc/passwd", "/etc/passwd"),
        (Act.READ, "", "."),
        (Act.NET, " API.Example.com:443 ", "api.example.com:443"),
        (Act.NET, "Example.COM..:0443", "example.com:443"),
        (Act.NET, "0x7f.1:80", "127.0.0.1:80"),
        (Act.NET, "[::FFFF:127.0.0.1]:80", "127.0.0.1:80"),
        (Act.NET, "::ffff:7f00:1", "127.0.0.1"),
        (Act.NET, "[0:0::1%eth0]:8080", "[::1]:8080"),
        (Act.NET, "[::1]", "::1"),
        (Act.NET, "0.0.0.0:80", "127.0.0.1:80"),
        (Act.NET, "[::]:80", "[::1]:80"),
        (Act.NET, "[2002:7f00:1::1]:80", "[2002:7f00:1::1]:80"),  # 6to4 names a relay: kept
        (Act.NET, "bücher.de", "xn--bcher-kva.de"),
        (Act.NET, "\uff11\uff12\uff17.\uff10.\uff10.\uff11", "127.0.0.1"),  # full-width digits
        (Act.EXEC, "/usr/bin/Python3", "/usr/bin/Python3"),
        ("write", "./a", "a"),
    ],
)
def test_targets_are_normalised_before_matching(act: Act | str, target: str, normal: str) -> None:
    assert normalise_target(act, target) == normal


def test_a_glob_cannot_reach_past_a_parent_part_by_its_spelling() -> None:
    policy = Policy.permissive().layer("app").deny_write("secrets/*")
    assert effect(policy, Act.WRITE, "src/../secrets/key.txt") is Effect.DENY


def reference_match(glob: str, text: str) -> bool:
    """A matcher written from the definition: * any run, ? one character, the rest literal."""

    @functools.cache
    def match(i: int, j: int) -> bool:
        if i == len(glob):
            return j == len(text)
        if glob[i] == "*":
            return match(i + 1, j) or (j < len(text) and match(i, j + 1))
        if j == len(text):
            return False
        return glob[i] in ("?", text[j]) and match(i + 1, j + 1)

    return match(0, 0)


@PROPERTY
@given(glob=st.text("ab./+([*?", max_size=8), text=st.text("ab./+([", max_size=10))
def test_glob_matching_agrees_with_a_reference_matcher(glob: str, text: str) -> None:
    assert match_glob(glob, text) == reference_match(glob, text)


@PROPERTY
@given(act=st.sampled_from(Act), target=st.text("aB./\\: ", max_size=10))
def test_normalising_a_target_twice_changes_nothing(act: Act, target: str) -> None:
    once = normalise_target(act, target)
    assert normalise_target(act, once) == once


@PROPERTY
@given(target=st.text("0179afxX.:[]%* ü", min_size=1, max_size=16))
def test_any_net_target_is_normalised_once_and_decided_without_a_crash(target: str) -> None:
    once = normalise_target(Act.NET, target)
    assert normalise_target(Act.NET, once) == once
    assert Policy.permissive().layer("app").deny_net(target).explain(Act.NET, once).effect in Effect
    problem = host_problem(target)
    assert problem is None or target in problem or repr(target) in problem


# Every spelling of an IPv4 address is that address


def inet_aton_part(value: int) -> st.SearchStrategy[str]:
    """One part of an inet_aton spelling: decimal, octal or hex, with leading zeros."""
    zeros = st.integers(0, 3).map(lambda count: "0" * count)
    return st.one_of(
        st.just(str(value)),
        zeros.map(lambda pad: f"0{pad}{value:o}"),
        st.tuples(st.sampled_from(["0x", "0X"]), zeros).map(
            lambda prefix: f"{prefix[0]}{prefix[1]}{value:x}"
        ),
    )


ANY_IPV4 = st.integers(0, 2**32 - 1)


@st.composite
def ipv4_spellings(
    draw: st.DrawFn, addresses: st.SearchStrategy[int] = ANY_IPV4
) -> tuple[str, str]:
    """An IPv4 address spelled one of the ways that reach it, and its canonical form."""
    value = draw(addresses)
    address = ipaddress.IPv4Address(value)
    canonical = "127.0.0.1" if value == 0 else str(address)  # 0.0.0.0 reaches this machine
    high, low = value >> 16, value & 0xFFFF
    ipv6_forms = [
        f"::ffff:{address}",
        f"::FFFF:{high:X}:{low:X}",
        f"0:0:0:0:0:ffff:{high:04x}:{low:04x}",
        f"64:ff9b::{address}",
        *([f"::{address}"] if value > 1 else []),  # ::0.0.0.1 is ::1, loopback's own
    ]
    form = draw(st.sampled_from(["inet_aton", *ipv6_forms]))
    if form != "inet_aton":
        zone = draw(st.sampled_from(["", "%eth0", "%25lo"]))
        return f"[{form}{zone}]", canonical
    count = draw(st.integers(1, 4))
    octets = value.to_bytes(4, "big")
    parts = [*octets[: count - 1], int.from_bytes(octets[count - 1 :], "big")]
    spelled = ".".join(draw(inet_aton_part(part)) for part in parts)
    return spelled + "." * draw(st.integers(0, 2)), canonical


@PROPERTY
@given(spelled=ipv4_spellings(), port=st.none() | st.integers(1, 65535))
def test_every_spelling_of_an_ipv4_address_is_decided_as_its_dotted_quad(
    spelled: tuple[str, str], port: int | None
) -> None:
    spelling, canonical = spelled
    target = spelling if port is None else f"{spelling}:{port}"
    expected = canonical if port is None else f"{canonical}:{port}"
    assert canonical_host(spelling) == canonical
    assert host_problem(spelling) is None  # the proxy and the transport take it, as this
    assert normalise_target(Act.NET, target) == expected

    verdict = Policy.permissive().layer("lockdown").deny_net(canonical).explain(Act.NET, target)
    assert (verdict.effect, str(verdict.rule), verdict.target) == (
        Effect.DENY,
        f"deny net {canonical}",
        expected,
    )
    # A rule written in the spelling means the address too.
    spelled_rule = Policy.permissive().layer("lockdown").deny_net(spelling)
    assert spelled_rule.explain(Act.NET, expected).effect is Effect.DENY


@PROPERTY
@given(spelled=ipv4_spellings(st.integers(0x7F00_0000, 0x7FFF_FFFF)))
def test_a_wildcard_deny_of_loopback_refuses_every_spelling_of_it(spelled: tuple[str, str]) -> None:
    spelling, _ = spelled
    policy = Policy.permissive().layer("lockdown").deny_net("127.*")
    assert policy.explain(Act.NET, f"{spelling}:8080").effect is Effect.DENY


# The builder


def test_rules_need_a_layer_of_the_callers_own() -> None:
    with pytest.raises(ConfigError, match=r"open one first with \.layer\(name\)"):
        Policy.permissive().allow_read("*")
    with pytest.raises(ConfigError, match=r"allow_write: .*\.layer\(name\)"):
        Policy.guarded().allow_write("*")


def test_a_builder_call_without_globs_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="deny_net: give at least one glob"):
        Policy.guarded().layer("app").deny_net()


def test_a_builder_call_with_a_list_says_to_pass_separate_arguments() -> None:
    with pytest.raises(ConfigError, match="separate arguments"):
        Policy.guarded().layer("app").allow_read(["*"])  # type: ignore[arg-type]


def test_a_builder_call_with_an_empty_glob_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="ask_exec: '': a glob must not be empty"):
        Policy.guarded().layer("app").ask_exec("")


def test_layer_names_are_unique_and_the_builtin_prefix_is_reserved() -> None:
    with pytest.raises(ConfigError, match="already a layer named 'app'"):
        Policy.guarded().layer("app").layer("app")
    with pytest.raises(ConfigError, match="'builtin-' prefix"):
        Policy.guarded().layer("builtin-mine")
    with pytest.raises(ConfigError, match="non-empty"):
        Policy.guarded().layer("")


def test_the_builder_leaves_the_policy_it_started_from_unchanged() -> None:
    base = Policy.guarded().layer("app")
    base.allow_write("*")
    assert base.layers[-1].rules == ()


def test_rule_takes_act_and_effect_as_names() -> None:
    policy = Policy.guarded().layer("app").rule("net", "*.pypi.org", "allow")
    assert effect(policy, Act.NET, "files.pypi.org:443") is Effect.ALLOW
    with pytest.raises(ConfigError, match=r"Policy\.rule: expected one of allow, ask, deny"):
        policy.rule(Act.NET, "*", "maybe")


def test_with_defaults_replaces_only_the_defaults_it_names() -> None:
    policy = Policy.guarded().with_defaults(exec="deny", net=Effect.ASK)
    assert policy.defaults == {
        Act.READ: Effect.ALLOW,
        Act.WRITE: Effect.ASK,
        Act.EXEC: Effect.DENY,
        Act.NET: Effect.ASK,
    }
    assert policy.layers == Policy.guarded().layers
    with pytest.raises(ConfigError, match="with_defaults: write: expected one of"):
        policy.with_defaults(write="sometimes")


def test_describe_lists_defaults_layers_rules_and_the_bound() -> None:
    text = Policy.guarded().contain(Policy.permissive().layer("child").deny_exec("rm")).describe()
    assert text.splitlines()[:3] == [
        "defaults: read allow, write allow, exec allow, net allow",
        "layer child:",
        "  deny exec rm",
    ]
    assert "within (wherever this bound is stricter, its verdict wins):" in text
    assert "  layer builtin-secrets:" in text
    assert "    deny read .env" in text


# Merge and contain


def test_merge_takes_the_stricter_default_of_each_act() -> None:
    merged = (
        Policy.permissive()
        .with_defaults(net="deny")
        .merge(Policy.permissive().with_defaults(exec="ask", net="allow"))
    )
    assert effect(merged, Act.EXEC, "make") is Effect.ASK
    assert effect(merged, Act.NET, "a.com") is Effect.DENY
    assert effect(merged, Act.READ, "a") is Effect.ALLOW


def test_merge_lets_no_allow_of_one_side_open_what_the_other_side_closes() -> None:
    opens = Policy.permissive().with_defaults(net="deny").layer("mine").allow_net("pypi.org")
    closes = Policy.guarded()
    assert effect(opens, Act.NET, "pypi.org") is Effect.ALLOW
    assert effect(opens.merge(closes), Act.NET, "pypi.org") is Effect.DENY
    assert effect(closes.merge(opens), Act.NET, "pypi.org") is Effect.DENY


def test_contain_gives_no_weight_to_a_child_allow_the_parent_does_not_give() -> None:
    parent = Policy.guarded()
    child = Policy.permissive().layer("child").allow_write("*").allow_net("*")
    contained = parent.contain(child)
    assert effect(contained, Act.WRITE, "src/x.py") is Effect.ASK
    assert effect(contained, Act.NET, "a.com") is Effect.DENY


def test_contain_keeps_a_child_deny_the_parent_would_allow() -> None:
    parent = Policy.permissive()
    child = Policy.permissive().layer("child").deny_write("tests/*")
    verdict = parent.contain(child).explain(Act.WRITE, "tests/test_x.py")
    assert verdict.effect is Effect.DENY
    assert verdict.layer == "child"


def test_contain_keeps_a_child_default_deny_even_where_a_parent_rule_allows() -> None:
    parent = Policy.guarded().layer("parent").allow_exec("python")
    child = Policy.guarded().with_defaults(exec="deny")
    assert effect(parent.contain(child), Act.EXEC, "python") is Effect.DENY


def test_a_child_ask_rule_does_not_beat_a_parent_default_deny() -> None:
    parent = Policy.guarded().with_defaults(exec="deny")
    child = Policy.permissive().layer("child").ask_exec("python")
    verdict = parent.contain(child).explain(Act.EXEC, "python")
    assert verdict.effect is Effect.DENY
    assert (verdict.rule, verdict.layer) == (None, None)


def test_contain_allows_what_both_parent_and_child_allow() -> None:
    parent = Policy.guarded().layer("parent").allow_write("src/*")
    child = Policy.guarded().layer("child").allow_write("src/sub/*")
    contained = parent.contain(child)
    assert effect(contained, Act.WRITE, "src/sub/a.py") is Effect.ALLOW
    assert effect(contained, Act.WRITE, "src/other.py") is Effect.ASK


# JSON


def test_a_policy_round_trips_through_json_exactly() -> None:
    parent = example_policy().with_defaults(net="ask")
    policy = parent.contain(Policy.permissive().layer("sub").deny_net("*.internal"))
    text = policy.model_dump_json()
    again = Policy.model_validate_json(text)
    assert again == policy
    assert again.model_dump_json() == text
    assert (
        again.explain(Act.NET, "db.internal").describe()
        == policy.explain(Act.NET, "db.internal").describe()
    )


def test_a_verdict_round_trips_through_json() -> None:
    verdict = example_policy().explain(Act.READ, "a/.env")
    assert Verdict.model_validate_json(verdict.model_dump_json()) == verdict


# Properties of merge and contain

GLOBS = ["*", "a", "a/*", "*.pem", "b?", "a/b", ".env", "x*", "*a*", "?"]
TARGETS = ["a", "a/b", "b1", "x.pem", "a/x.pem", ".env", "c/.env", "xa", "b", "ab", "a/b/c"]

rules = st.builds(
    Rule, act=st.sampled_from(Act), glob=st.sampled_from(GLOBS), effect=st.sampled_from(Effect)
)
defaults = st.fixed_dictionaries({act: st.sampled_from(Effect) for act in Act})


@st.composite
def policies(draw: st.DrawFn, depth: int = 1) -> Policy:
    count = draw(st.integers(0, 3))
    layers = tuple(
        Layer(name=f"l{i}", rules=tuple(draw(st.lists(rules, max_size=4)))) for i in range(count)
    )
    within = draw(st.none() | policies(depth - 1)) if depth > 0 else None
    return Policy(layers=layers, defaults=draw(defaults), within=within)


@PROPERTY
@given(parent=policies(), child=policies())
def test_contain_is_never_wider_than_the_parent_and_never_loses_a_child_deny(
    parent: Policy, child: Policy
) -> None:
    contained = parent.contain(child)
    for act in Act:
        for target in TARGETS:
            got = effect(contained, act, target)
            mine, theirs = effect(parent, act, target), effect(child, act, target)
            assert got.strictness >= mine.strictness
            if theirs is Effect.DENY:
                assert got is Effect.DENY
            assert got is Effect.stricter(mine, theirs)


@PROPERTY
@given(left=policies(), right=policies())
def test_merge_is_never_wider_than_either_side(left: Policy, right: Policy) -> None:
    merged = left.merge(right)
    for act in Act:
        for target in TARGETS:
            got = effect(merged, act, target)
            assert got.strictness >= effect(left, act, target).strictness
            assert got.strictness >= effect(right, act, target).strictness


@PROPERTY
@given(policy=policies())
def test_any_policy_round_trips_through_json(policy: Policy) -> None:
    assert Policy.model_validate_json(policy.model_dump_json()) == policy


# TOML

EXAMPLE_TOML = """
    [policy]
    base = "guarded"
    [policy.layers.app]
    allow_read = ["*"]
    allow_write = ["src/*"]
    deny_read = ["secrets/*"]
    deny_write = ["secrets/*"]
    ask_exec = ["python"]
"""


def write_toml(tmp_path: Path, text: str, name: str = "contract.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_a_toml_policy_equals_the_builder_example(tmp_path: Path) -> None:
    assert Policy.from_toml(write_toml(tmp_path, EXAMPLE_TOML)) == example_policy()


def test_a_toml_policy_defaults_to_the_default_base_and_overrides_defaults(
    tmp_path: Path,
) -> None:
    path = write_toml(tmp_path, "[policy.defaults]\nexec = 'deny'\n")
    assert Policy.from_toml(path) == Policy.guarded().with_defaults(exec="deny")


def test_a_toml_policy_may_start_from_the_permissive_base(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "[policy]\nbase = 'permissive'\n")
    assert Policy.from_toml(path) == Policy.permissive()


def test_a_toml_policy_may_start_from_the_default_base(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "[policy]\nbase = 'default'\n")
    assert Policy.from_toml(path) == Policy.default()


def test_toml_layers_keep_document_order(tmp_path: Path) -> None:
    text = "[policy.layers.zeta]\ndeny_net = ['a']\n[policy.layers.alpha]\ndeny_net = ['a']\n"
    policy = Policy.from_toml(write_toml(tmp_path, text))
    assert [layer.name for layer in policy.layers] == ["builtin-secrets", "zeta", "alpha"]
    assert policy.explain(Act.NET, "a").layer == "zeta"


def test_from_table_builds_from_a_parsed_table_and_names_where_it_came_from() -> None:
    table = {"layers": {"app": {"allow_net": ["pypi.org"]}}}
    policy = Policy.from_table(table, "run.toml")
    assert effect(policy, Act.NET, "pypi.org:443") is Effect.ALLOW
    with pytest.raises(ConfigError, match=r"^run\.toml: policy\.layers\.app: expected a table"):
        Policy.from_table({"layers": {"app": 1}}, "run.toml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[policy.layers.app]\nalow_write = ['src/*']",
            "policy.layers.app.alow_write: unknown key; the keys are: allow_read, ",
        ),
        (
            "[policy.defaults]\nexec = 'maybe'",
            "policy.defaults.exec: expected one of allow, ask, deny, not 'maybe'",
        ),
        ("[policy.defaults]\ntool = 'deny'", "policy.defaults.tool: unknown key; the keys are"),
        ("[policy]\ndefaults = 'deny'", "policy.defaults: expected a table, not a string"),
        (
            "[policy]\nbase = 'lenient'",
            "policy.base: expected one of guarded, default, permissive, not 'lenient'",
        ),
        ("[policy]\nbase = 3", "policy.base: expected one of guarded, default, permissive, not 3"),
        ("[policy]\nrules = []", "policy.rules: unknown key; the keys are: base, defaults, layers"),
        ("[policy]\nlayers = ['app']", "policy.layers: expected a table, not a list"),
        ("[policy.layers]\napp = 'allow'", "policy.layers.app: expected a table of rules"),
        (
            "[policy.layers.builtin-secrets]\nallow_read = ['.env']",
            "policy.layers.builtin-secrets: the 'builtin-' prefix is kept",
        ),
        (
            "[policy.layers.app]\nallow_read = '*'",
            'policy.layers.app.allow_read: expected a list of globs; write ["*"]',
        ),
        ("[policy.layers.app]\ndeny_net = {a = 1}", "policy.layers.app.deny_net: expected a list"),
        (
            "[policy.layers.app]\nask_exec = ['python', 3]",
            "policy.layers.app.ask_exec.1: expected a glob string, not an integer",
        ),
        (
            "[policy.layers.app]\nask_exec = ['']",
            "policy.layers.app.ask_exec.0: a glob must not be empty",
        ),
        (
            '[policy.layers."my app"]\nask_net = 1',
            'policy.layers."my app".ask_net: expected a list of globs, not an integer',
        ),
    ],
)
def test_each_toml_mistake_names_the_file_and_the_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write_toml(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        Policy.from_toml(path)
    assert str(raised.value).startswith(f"{path}: {message}")


def test_a_toml_file_without_a_policy_table_says_so(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "goal = 'x'\n")
    with pytest.raises(ConfigError, match=r"contract\.toml: no \[policy\] table"):
        Policy.from_toml(path)


def test_bad_toml_and_a_missing_file_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"contract\.toml: not valid TOML"):
        Policy.from_toml(write_toml(tmp_path, "[policy\n"))
    with pytest.raises(ConfigError, match="cannot read the policy"):
        Policy.from_toml(tmp_path / "missing.toml")


def test_a_table_built_in_python_with_a_key_that_is_not_a_string_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"policy\.layers\.1: a layer's name must be a string"):
        Policy.from_table({"layers": {1: {"allow_read": ["*"]}}}, "code")
