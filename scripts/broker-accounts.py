#!/usr/bin/env python3
"""broker-accounts.py: accounts created, changed and removed while mosquitto runs (issue 30), through its dynamic
security plugin (mosquitto_dynamic_security.so, in Debian's mosquitto package): no password file to rewrite, no
reload.

    scripts/broker-accounts.py init --file F --secrets DIR          the plugin's file, with the accounts admin
    scripts/broker-accounts.py provision --accounts A --secrets DIR the accounts of config/security/accounts.yaml
    scripts/broker-accounts.py add-rider r-7f3a [r-...]             a rider account per ride (password in DIR)
    scripts/broker-accounts.py remove-rider r-7f3a [r-...]          at the ride's end: the rider is disconnected
    scripts/broker-accounts.py add-vehicle v-0044 / remove-vehicle v-0044

Every command but init talks to a running broker as the accounts admin (--host, --port, --cafile; the admin's
password is DIR/accounts-admin), over `$CONTROL/dynamic-security/v1`, with mosquitto_rr. Whoever may publish
there is in effect a superuser: only this admin account may, and dispatch runs this script (it books rides and
stops them, so it issues rider accounts and removes them at the ride's end). Commands for many accounts go in
one request; each account's outcome is checked, and the script fails naming the first refusal.

What each role may do comes from scripts/broker_roles.py, as for the static ACL; mosquitto 2.0's plugin
substitutes no %u, so each rider and each vehicle gets a role of its own. Passwords are random, kept in
DIR/<account> (mode 600) and never printed."""
import argparse
import json
import os
import secrets
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker_roles  # noqa: E402  (beside this script)

ADMIN = "accounts-admin"
CONTROL = "$CONTROL/dynamic-security/v1"
# Outcomes that leave the account as asked: a rerun of provision or add-rider, a remove of one already gone.
HARMLESS = ("already exists", "not found")


def secret(directory, name, create):
    """The account's password: read from DIR/name, or made and kept there (mode 600) when `create`."""
    path = os.path.join(directory, name)
    if os.path.exists(path):
        with open(path) as handle:
            return handle.readline().strip()
    if not create:
        sys.exit(f"broker-accounts: no password for '{name}' in {directory}")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    password = secrets.token_urlsafe(24)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(password + "\n")
    return password


def request(args, commands):
    """Sends the commands in one message and returns the plugin's responses, one per command, in order."""
    correlation = secrets.token_hex(8)
    for index, command in enumerate(commands):
        command["correlationData"] = f"{correlation}-{index}"
    command_line = ["mosquitto_rr", "-h", args.host, "-p", str(args.port), "-u", ADMIN, "-P",
                    secret(args.secrets, ADMIN, create=False), "-t", CONTROL, "-e", CONTROL + "/response",
                    "-W", str(args.timeout), "-m", json.dumps({"commands": commands})]
    if args.cafile:
        command_line += ["--cafile", args.cafile]
    result = subprocess.run(command_line, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"broker-accounts: no answer from the broker at {args.host}:{args.port} "
                 f"({result.stderr.strip() or 'mosquitto_rr ' + str(result.returncode)})")
    responses = json.loads(result.stdout)["responses"]
    if [response.get("correlationData") for response in responses] != [c["correlationData"] for c in commands]:
        sys.exit("broker-accounts: the answer is another request's (another admin at work?); run it again")
    return responses


def check(commands, responses):
    """Fails naming the first command the plugin refused for a reason other than a harmless one. (2.0.11 answers
    "Internal error" to linking a role a client already has: harmless when that client already existed.)"""
    existing = set()
    for command, response in zip(commands, responses):
        error = response.get("error")
        if command["command"] == "createClient" and error and "already exists" in error.lower():
            existing.add(command["username"])
        if command["command"] == "addClientRole" and command["username"] in existing:
            continue
        if error and not any(harmless in error.lower() for harmless in HARMLESS):
            target = command.get("username") or command.get("rolename")
            sys.exit(f"broker-accounts: {command['command']} {target}: {error}")


def account(role_name, rules, user, password):
    """The commands that make `user` with a role of its own holding `rules`: the role, the client, then the
    link (2.0.11: roles given inside createClient are not linked back, and deleting one then corrupts memory)."""
    return [
        {"command": "createRole", "rolename": role_name, "acls": broker_roles.dynsec_acls(rules, user)},
        {"command": "createClient", "username": user, "password": password},
        {"command": "addClientRole", "username": user, "rolename": role_name, "priority": 0},
    ]


def removal(role_name, user):
    return [{"command": "deleteClient", "username": user}, {"command": "deleteRole", "rolename": role_name}]


def run_batch(args, commands):
    # One message per 300 commands: the plugin rewrites its whole file after each change anyway, and a message
    # stays small.
    for start in range(0, len(commands), 300):
        batch = commands[start:start + 300]
        check(batch, request(args, batch))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["init", "provision", "add-rider", "remove-rider", "add-vehicle",
                                            "remove-vehicle"])
    parser.add_argument("names", nargs="*", help="ride or vehicle identifiers")
    parser.add_argument("--file", help="init: the plugin's file to create (plugin_opt_config_file)")
    parser.add_argument("--accounts", default="config/security/accounts.yaml")
    parser.add_argument("--secrets", default="var/security/secrets")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8883)
    parser.add_argument("--cafile")
    parser.add_argument("--timeout", type=int, default=10)
    args = parser.parse_args()

    if args.command == "init":
        if not args.file:
            sys.exit("broker-accounts: init needs --file")
        if os.path.exists(args.file):
            print(f"broker-accounts: {args.file} exists; kept")
            return
        password = secret(args.secrets, ADMIN, create=True)
        # mosquitto_ctrl exits 0 even when it refuses: the file is the proof.
        subprocess.run(["mosquitto_ctrl", "dynsec", "init", args.file, ADMIN, password], stdin=subprocess.DEVNULL,
                       capture_output=True)
        if not os.path.exists(args.file):
            sys.exit(f"broker-accounts: mosquitto_ctrl did not create {args.file}")
        os.chmod(args.file, 0o600)
        print(f"broker-accounts: {args.file} with the accounts admin '{ADMIN}' (password in {args.secrets})")
        return

    commands = []
    if args.command == "provision":
        import yaml
        with open(args.accounts) as handle:
            listed = yaml.safe_load(handle) or {}
        for role, rules in broker_roles.ROLES.items():
            for user in listed.get(role, []):
                commands += account(f"{role}-{user}", rules, user, secret(args.secrets, user, create=True))
    elif args.command in ("add-rider", "add-vehicle"):
        rules = broker_roles.RIDER if args.command == "add-rider" else broker_roles.VEHICLE
        kind = "rider" if args.command == "add-rider" else "vehicles"
        for name in args.names:
            commands += account(f"{kind}-{name}", rules, name, secret(args.secrets, name, create=True))
    else:
        kind = "rider" if args.command == "remove-rider" else "vehicles"
        for name in args.names:
            commands += removal(f"{kind}-{name}", name)
    if not commands:
        sys.exit("broker-accounts: no account named")
    run_batch(args, commands)
    if args.command.startswith("remove"):
        for name in args.names:
            path = os.path.join(args.secrets, name)
            if os.path.exists(path):
                os.remove(path)
    print(f"broker-accounts: {args.command}: {len(args.names) or len(commands) // 3} accounts")


if __name__ == "__main__":
    main()
