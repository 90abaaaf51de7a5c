#!/usr/bin/env python3
"""broker-accounts.py: accounts created, changed and removed while mosquitto runs (issue 30), through its dynamic
security plugin (mosquitto_dynamic_security.so, in Debian's mosquitto package): no password file to rewrite, no
reload.

    scripts/broker-accounts.py init --file F --secrets DIR          the plugin's file: the admin, accounts.yaml
    scripts/broker-accounts.py provision --accounts A --secrets DIR the accounts of config/security/accounts.yaml
    scripts/broker-accounts.py add-rider r-7f3a [r-...]             a rider account per ride (password in DIR)
    scripts/broker-accounts.py remove-rider r-7f3a [r-...]          at the ride's end: the rider is disconnected
    scripts/broker-accounts.py add-vehicle v-0044 / remove-vehicle v-0044

Every command but init talks to a running broker as the accounts admin (--host, --port, --cafile; the admin's
password is DIR/accounts-admin), over `$CONTROL/dynamic-security/v1`, with mosquitto_rr. The admin's credentials
go in an options file of mode 600, never on a command line (`ps` shows those to every user). The request itself,
with the new accounts' passwords, is on mosquitto_rr's command line for the moment it runs: its -s and -f send
an empty payload in mosquitto 2.0.11 (measured). Run this script where no other user has a shell. Whoever may publish
there is in effect a superuser: only this admin account may, and dispatch runs this script (it books rides and
stops them, so it issues rider accounts and removes them at the ride's end). Commands for many accounts go in
one request; each account's outcome is checked, and the script fails naming the first refusal.

What each role may do comes from scripts/broker_roles.py, as for the static ACL; mosquitto 2.0's plugin
substitutes no %u, so each rider and each vehicle gets a role of its own. Passwords are random, kept in
DIR/<account> (mode 600) and never printed. DIR (--secrets) defaults to var/security/accounts, apart from the static
accounts' folder (--static-secrets, var/security/secrets), whose passwords scripts/broker-security.py shares (it
takes every unlisted file of its folder for a static rider).

Names are I1 identifiers (1 to 64 of A-Z a-z 0-9 . _ : -): no wildcard, no path. The accounts admin and the
accounts of config/security/accounts.yaml are not riders or vehicles: add-rider and remove-rider refuse them.
provision creates what is missing; a role's rules changed in broker_roles.py reach an existing role only by
removing and adding its account again (the plugin of 2.0.11 has no way to replace a role's ACLs at once)."""
import argparse
import base64
import hashlib
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker_roles  # noqa: E402  (beside this script)

ADMIN = "accounts-admin"
CONTROL = "$CONTROL/dynamic-security/v1"
# Outcomes that leave the account as asked, by command: a rerun of provision or add-rider, a remove of one gone.
HARMLESS = {"createRole": "already exists", "createClient": "already exists", "deleteClient": "not found",
            "deleteRole": "not found"}
# I1: what a ride or vehicle identifier may be; also keeps wildcards out of roles and paths out of DIR.
IDENTIFIER = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def valid(name):
    if not IDENTIFIER.match(name) or name in (".", ".."):
        sys.exit(f"broker-accounts: '{name}' is not an identifier (I1: 1 to 64 of A-Z a-z 0-9 . _ : -)")
    return name


def secret(directory, name, create):
    """The account's password and whether it was made now: read from DIR/name, or made and kept there (mode 600)
    when `create`."""
    path = os.path.join(directory, valid(name))
    if os.path.exists(path):
        with open(path) as handle:
            return handle.readline().strip(), False
    if not create:
        sys.exit(f"broker-accounts: no password for '{name}' in {directory}")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    password = secrets.token_urlsafe(24)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(password + "\n")
    return password, True


def request(args, commands):
    """Sends the commands in one message and returns the plugin's responses, one per command, in order."""
    correlation = secrets.token_hex(8)
    for index, command in enumerate(commands):
        command["correlationData"] = f"{correlation}-{index}"
    command_line = ["mosquitto_rr", "-h", args.host, "-p", str(args.port), "-t", CONTROL, "-e",
                    CONTROL + "/response", "-W", str(args.timeout), "-m", json.dumps({"commands": commands})]
    if args.cafile:
        command_line += ["--cafile", args.cafile]
    password, _ = secret(args.secrets, ADMIN, create=False)
    # mosquitto_rr reads options from $XDG_CONFIG_HOME/mosquitto_rr: the credentials go there, in a private folder.
    with tempfile.TemporaryDirectory() as config:
        descriptor = os.open(os.path.join(config, "mosquitto_rr"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(f"-u {ADMIN}\n-P {password}\n")
        result = subprocess.run(command_line, capture_output=True, text=True,
                                env=dict(os.environ, XDG_CONFIG_HOME=config))
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
        harmless = HARMLESS.get(command["command"])
        if error and not (harmless and harmless in error.lower()):
            target = command.get("username") or command.get("rolename")
            sys.exit(f"broker-accounts: {command['command']} {target}: {error}")


def account(role_name, rules, user, secrets_dir):
    """The commands that make `user` with a role of its own holding `rules`: the role, the client, then the
    link (2.0.11: roles given inside createClient are not linked back, and deleting one then corrupts memory).
    A password made now for a client that may exist already (its secret file was lost) is set on it too."""
    password, made = secret(secrets_dir, user, create=True)
    commands = [
        {"command": "createRole", "rolename": role_name, "acls": broker_roles.dynsec_acls(rules, user)},
        {"command": "createClient", "username": user, "password": password},
        {"command": "addClientRole", "username": user, "rolename": role_name, "priority": 0},
    ]
    if made:
        commands.append({"command": "setClientPassword", "username": user, "password": password})
    return commands


def hashed(password):
    """The plugin's stored form of a password: PBKDF2-HMAC-SHA512, 101 iterations, a 12-byte salt."""
    salt = secrets.token_bytes(12)
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, 101)
    return {"password": base64.b64encode(digest).decode(), "salt": base64.b64encode(salt).decode(),
            "iterations": 101}


def initial(password):
    """The plugin's first file: the accounts admin alone, whose role may use the control topic and nothing else;
    by default nobody may publish or subscribe (each account's role grants what it may)."""
    admin_acls = [{"acltype": kind, "topic": "$CONTROL/dynamic-security/#", "priority": 0, "allow": True}
                  for kind in ("publishClientSend", "publishClientReceive", "subscribePattern", "unsubscribePattern")]
    return {
        "defaultACLAccess": {"publishClientSend": False, "publishClientReceive": True, "subscribe": False,
                             "unsubscribe": True},
        "clients": [dict({"username": ADMIN, "textname": "accounts admin", "roles": [{"rolename": "accounts-admin"}]},
                         **hashed(password))],
        "groups": [],
        "roles": [{"rolename": "accounts-admin", "acls": admin_acls}],
    }


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
    parser.add_argument("--secrets", default="var/security/accounts",
                        help="the accounts admin's password and those of riders and vehicles added here")
    parser.add_argument("--static-secrets", default="var/security/secrets",
                        help="the passwords of config/security/accounts.yaml's accounts, shared with "
                             "scripts/broker-security.py so that both listeners agree")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8883)
    parser.add_argument("--cafile")
    parser.add_argument("--timeout", type=int, default=10)
    args = parser.parse_args()

    import yaml
    with open(args.accounts) as handle:
        listed = yaml.safe_load(handle) or {}
    unknown = set(listed) - set(broker_roles.ROLES)
    if unknown:
        sys.exit(f"broker-accounts: unknown roles in {args.accounts}: {', '.join(sorted(unknown))} (the shared "
                 "'drivers' account is gone: a driver app signs in as its vehicle, A3)")

    if args.command == "init":
        if not args.file:
            sys.exit("broker-accounts: init needs --file")
        if os.path.exists(args.file):
            print(f"broker-accounts: {args.file} exists; kept (provision adds accounts listed since)")
            return
        password, _ = secret(args.secrets, ADMIN, create=True)
        configuration = initial(password)
        # The accounts needed to start, written before the broker runs (Docker Compose's setup service, make run);
        # later ones come through the running broker.
        for role, rules in broker_roles.ROLES.items():
            for user in listed.get(role, []):
                role_name = f"{role}-{valid(user)}"
                configuration["roles"].append({"rolename": role_name, "acls": broker_roles.dynsec_acls(rules, user)})
                configuration["clients"].append(
                    dict({"username": user, "roles": [{"rolename": role_name}]},
                         **hashed(secret(args.static_secrets, user, create=True)[0])))
        # Written here rather than by `mosquitto_ctrl dynsec init`, which takes the password on its command line.
        descriptor = os.open(args.file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            json.dump(configuration, handle, indent=2)
        print(f"broker-accounts: {args.file} with the accounts admin '{ADMIN}' and {len(configuration['clients']) - 1} "
              f"accounts of {args.accounts} (passwords in {args.static_secrets})")
        return

    static = {user for users in listed.values() for user in users} | {ADMIN}
    for name in args.names:
        if valid(name) in static:
            sys.exit(f"broker-accounts: '{name}' is the accounts admin or an account of {args.accounts}, "
                     "not a rider or vehicle to add or remove here")
    commands = []
    if args.command == "provision":
        for role, rules in broker_roles.ROLES.items():
            for user in listed.get(role, []):
                commands += account(f"{role}-{valid(user)}", rules, user, args.static_secrets)
    elif args.command in ("add-rider", "add-vehicle"):
        rules = broker_roles.RIDER if args.command == "add-rider" else broker_roles.VEHICLE
        kind = "rider" if args.command == "add-rider" else "vehicles"
        for name in args.names:
            commands += account(f"{kind}-{name}", rules, name, args.secrets)
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
    print(f"broker-accounts: {args.command}: {len(args.names) or len(static) - 1} accounts")


if __name__ == "__main__":
    main()
