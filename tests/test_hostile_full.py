"""Hostile episodes against tasks that need the `full` image (run by `make test-full`, not CI).

Weave-DevOps-3 hands the episode's shell a sudo rule for nginx over a config the shell writes. A root
nginx would open every log path that config names and print what it cannot parse, so these episodes aim
it at root-only files and check that nothing was read or written as root, and that the task still
cannot be scored by them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from weavegym.envs.weave_env import WeaveEnv

pytestmark = [pytest.mark.full_image, pytest.mark.timeout(1800)]

SITE = "/etc/nginx/sites-available/shop"


@pytest.fixture(scope="module")
def env() -> Iterator[WeaveEnv]:
    env = WeaveEnv("Weave-DevOps-3")
    yield env
    env.close()


def _shell(env: WeaveEnv, command: str) -> str:
    obs, _, _, _, _ = env.step({"kind": "shell", "command": command, "timeout": 120})
    return str(obs["terminal"])


def test_nginx_under_sudo_cannot_read_or_write_as_root(env: WeaveEnv) -> None:
    env.reset(seed=3)
    # First the task's own fix of the snippet name, so that the config is otherwise valid and nginx really
    # gets to the hostile lines.
    snippet = env.prepared.truth["snippet"]
    _shell(env, f"sed -i 's|snippets/[^;]*;|snippets/{snippet};|' {SITE}")
    # As www-data nginx cannot open /etc/shadow, so `nginx -t` has nothing of it to print.
    leak = _shell(env, f"sed -i '1i include /etc/shadow;' {SITE} && sudo nginx -t 2>&1; sed -i '1d' {SITE}")
    assert "/etc/shadow" in leak and "Permission denied" in leak and "root:" not in leak, leak
    # A log pointed into sudoers.d (with a format that would be a sudo rule) is never created: as root, the
    # config test alone would have created it and a request would have written the rule.
    forged = "workspace ALL=(ALL) NOPASSWD: ALL"
    attempt = _shell(env, "sed -i 's|^server {|log_format pwn \"$arg_a\";\\nserver {|; "
                          f"s|access_log [^;]*;|access_log /etc/sudoers.d/pwn pwn;|' {SITE} && "
                          "sudo nginx -t 2>&1; sudo systemctl restart nginx 2>&1; "
                          "python3 -c \"import urllib.request, urllib.parse; urllib.request.urlopen("
                          f"'http://127.0.0.1:%d/?a=' % {env.prepared.params['port']} + urllib.parse.quote("
                          f"'{forged}'), timeout=5)\" 2>&1 | tail -n 1; "
                          "sudo -n true 2>&1; echo sudo-rc=$?")
    assert "/etc/sudoers.d/pwn" in attempt and "Permission denied" in attempt, attempt
    assert env.backend.client is not None
    assert not env.backend.client.stat("/etc/sudoers.d/pwn").exists, attempt  # root's view
    assert "sudo-rc=1" in attempt, attempt
    # With the hostile lines gone nginx starts, and its master runs as www-data, not root.
    who = _shell(env, f"sed -i '/log_format pwn/d; s|access_log /etc/sudoers.d/pwn pwn;|"
                      f"access_log /var/log/nginx/shop.access.log;|' {SITE} && sudo systemctl restart nginx 2>&1; "
                      "ps -eo user:12,args | grep '[n]ginx: master'; sudo -l 2>&1 | grep -c NOEXEC")
    assert "www-data" in who and "root " not in who and who.strip().splitlines()[-1] != "0", who
    _, reward, terminated, _, _ = env.step("done()")
    assert terminated and reward < 1.0
