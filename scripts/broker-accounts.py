#!/usr/bin/env python3
"""broker-accounts.py: accounts created, changed and removed while mosquitto runs, through its dynamic
security plugin (mosquitto_dynamic_security.so, in Debian's mosquitto package): no password file to rewrite, no
reload.

    scripts/broker-accounts.py init --file F --secrets DIR          the plugin's file: the admin, accounts.yaml
    scripts/broker-accounts.py provision --accounts A --secrets DIR the accounts of config/security/accounts.yaml
    scripts/broker-accounts.py add-rider r-7f3a [r-...] [--devices N] a rider account per ride (password in DIR)
    scripts/broker-accounts.py remove-rider r-7f3a [r-...]          at the ride's end: the rider is disconnected
    scripts/broker-accounts.py add-vehicle v-0044 [--devices 2] / remove-vehicle v-0044
    scripts/broker-accounts.py upgrade --accounts A --secrets DIR   an existing broker brought to A4 (below)

Every command but init talks to a running broker as the accounts admin (--host, --port, --cafile; the admin's
password is DIR/accounts-admin), over `$CONTROL/dynamic-security/v1`, from this process (paho-mqtt): no password,
old or new, is ever on a command line (`ps` shows those to every user). Whoever may publish there is in effect a
superuser: only this admin account may, and dispatch runs this script (it books rides and stops them, so it issues
rider accounts and removes them at the ride's end). Commands for many accounts go in one request; each account's
outcome is checked, and the script fails naming the first refusal.

A4: every account is bound to one client id, its own name (scripts/broker_roles.py), and by default an account
receives nothing its role does not grant (publishClientReceive denied). `--devices N` makes N accounts sharing one
role: NAME for the first device, NAME~2 ... NAME~N for the others (a rider's second phone; a vehicle's driver app
beside its tracker), each with its own password. One name space: a name is a rider's or a vehicle's, never both,
and add-rider, add-vehicle, remove-rider and remove-vehicle refuse a name of the other kind. `upgrade` brings a
broker set up by an earlier release to this: default access denies receiving, the password listener's `worker`
account (the workers sign in by certificate only) is removed, every account is bound to its name, and a name that
is both a rider's and a vehicle's keeps the vehicle and loses the rider's role (named in the output, to issue
again under another name).

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
import fcntl
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker_roles  # noqa: E402  (beside this script)

ADMIN = "accounts-admin"
CONTROL = "$CONTROL/dynamic-security/v1"
# Outcomes that leave the account as asked, by command: a rerun of provision or add-rider, a remove of one gone.
HARMLESS = {"createRole": "already exists", "createClient": "already exists", "deleteClient": "not found",
            "deleteRole": "not found", "getClient": "not found", "removeClientRole": "not found"}
# Devices per rider or vehicle at most (--devices): remove-rider removes NAME~2 ... NAME~MAX_DEVICES too.
MAX_DEVICES = 8
# I1: what a ride or vehicle identifier may be; also keeps wildcards out of roles and paths out of DIR. The worker's
# rule is RideStatusKit's `Identifier`; IdentifierRuleTests checks that this one agrees with it.
IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")


def valid(name):
    if not IDENTIFIER.fullmatch(name):
        sys.exit(f"broker-accounts: '{name}' is not an identifier (I1: 1 to 64 of A-Z a-z 0-9 . _ : -, "
                 "the first alphanumeric)")
    return name


def reserved(name):
    """A4: a name a rider or vehicle may not have, since an account's client id is its name: the workers' client
    ids and the services' names, whether listed in accounts.yaml yet or not."""
    return any(name == prefix or name.startswith(prefix + "-") for prefix in broker_roles.RESERVED_PREFIXES)


def secret(directory, name, create):
    """The account's password and whether it was made now: read from DIR/name, or made and kept there (mode 600)
    when `create`."""
    base, _, device = name.partition(broker_roles.DEVICE_SEPARATOR)
    valid(base)
    if device and not (device.isdigit() and 2 <= int(device) <= MAX_DEVICES):
        sys.exit(f"broker-accounts: '{name}' is not an account name (NAME or NAME~2 to NAME~{MAX_DEVICES})")
    path = os.path.join(directory, name)
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
    """Sends the commands in one message and returns the plugin's responses, one per command, in order. The admin
    signs in from this process with paho-mqtt, under its own bound client id (A4)."""
    import paho.mqtt.client as mqtt

    correlation = secrets.token_hex(8)
    for index, command in enumerate(commands):
        command["correlationData"] = f"{correlation}-{index}"
    if not args.cafile:
        sys.exit("broker-accounts: --cafile is required: the accounts admin's password never travels in clear")
    password, _ = secret(args.secrets, ADMIN, create=False)
    done = threading.Event()
    outcome = {}
    sent = []

    def finish(**values):
        outcome.update(values)
        done.set()

    def on_connect(client, _userdata, _flags, reason_code, _properties):
        if reason_code.is_failure:
            finish(error=f"the broker refused the accounts admin: {reason_code}")
        elif sent:
            # Sent once only: a request cut off (another admin took the client id, or a change to the admin
            # itself) may have been applied; the caller checks and runs it again if it must.
            finish(error="the connection was lost after the request was sent; check and run it again")
        else:
            client.subscribe(CONTROL + "/response", qos=1)

    def on_subscribe(client, _userdata, _mid, reason_codes, _properties):
        if any(code.is_failure for code in reason_codes):
            finish(error=f"the accounts admin may not read {CONTROL}/response: {reason_codes[0]}")
        elif not sent:
            sent.append(True)
            client.publish(CONTROL, json.dumps({"commands": commands}), qos=1)

    def on_message(_client, _userdata, message):
        try:
            responses = json.loads(message.payload)["responses"]
        except (ValueError, KeyError, TypeError):
            return
        # Every admin's answers come on the one response topic: ours carry our correlation data.
        if responses and str(responses[0].get("correlationData", "")).startswith(correlation + "-"):
            finish(responses=responses)

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=broker_roles.client_id(ADMIN),
                         protocol=mqtt.MQTTv311)
    client.username_pw_set(ADMIN, password)
    client.tls_set(ca_certs=args.cafile)
    client.on_connect, client.on_subscribe, client.on_message = on_connect, on_subscribe, on_message
    # The plugin writes its whole file after each change (about 60 ms an account near 1,000): room for that.
    timeout = max(args.timeout, len(commands) * 0.1)
    try:
        client.connect(args.host, args.port, keepalive=30)
    except (OSError, ValueError) as error:
        sys.exit(f"broker-accounts: no answer from the broker at {args.host}:{args.port} ({error})")
    client.loop_start()
    answered = done.wait(timeout)
    client.disconnect()
    client.loop_stop()
    if not answered:
        sys.exit(f"broker-accounts: no answer from the broker at {args.host}:{args.port} within {timeout:.0f} s")
    if "error" in outcome:
        sys.exit(f"broker-accounts: {outcome['error']}")
    responses = outcome["responses"]
    if [response.get("correlationData") for response in responses] != [c["correlationData"] for c in commands]:
        sys.exit("broker-accounts: the answer does not match the request (another admin at work?); run it again")
    return responses


def check(commands, responses, existing=None):
    """Fails naming the first command the plugin refused for a reason other than a harmless one. (2.0.11 answers
    "Internal error" to linking a role a client already has: harmless when that client already existed.)"""
    existing = set() if existing is None else existing
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


def account(role_name, rules, user, secrets_dir, devices=1):
    """The commands that make `user`'s role holding `rules`, then an account per device linked to it (the client,
    bound to its name as client id, then the link: 2.0.11 does not link back roles given inside createClient, and
    deleting one then corrupts memory). A password made now for a client that may exist already (its secret file
    was lost) is set on it too."""
    commands = [{"command": "createRole", "rolename": role_name, "acls": broker_roles.dynsec_acls(rules, user)}]
    for name in broker_roles.device_accounts(user, devices):
        password, made = secret(secrets_dir, name, create=True)
        commands += [
            {"command": "createClient", "username": name, "password": password,
             "clientid": broker_roles.client_id(name)},
            {"command": "addClientRole", "username": name, "rolename": role_name, "priority": 0},
        ]
        if made:
            commands.append({"command": "setClientPassword", "username": name, "password": password})
    return commands


def hashed(password):
    """The plugin's stored form of a password: PBKDF2-HMAC-SHA512, 101 iterations, a 12-byte salt."""
    salt = secrets.token_bytes(12)
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, 101)
    return {"password": base64.b64encode(digest).decode(), "salt": base64.b64encode(salt).decode(),
            "iterations": 101}


# A4: nobody publishes, subscribes or receives what its role does not grant. Receiving denied by default matters
# for a session whose subscriptions outlive a role's change: a delivery outside the role is dropped.
DEFAULT_ACCESS = {"publishClientSend": False, "publishClientReceive": False, "subscribe": False, "unsubscribe": True}


def initial(password):
    """The plugin's first file: the accounts admin alone, whose role may use the control topic and nothing else;
    by default nobody may publish or subscribe (each account's role grants what it may)."""
    admin_acls = [{"acltype": kind, "topic": "$CONTROL/dynamic-security/#", "priority": 0, "allow": True}
                  for kind in ("publishClientSend", "publishClientReceive", "subscribePattern", "unsubscribePattern")]
    return {
        "defaultACLAccess": DEFAULT_ACCESS,
        "clients": [dict({"username": ADMIN, "clientid": broker_roles.client_id(ADMIN), "textname": "accounts admin",
                          "roles": [{"rolename": "accounts-admin"}]}, **hashed(password))],
        "groups": [],
        "roles": [{"rolename": "accounts-admin", "acls": admin_acls}],
    }


def removal(role_name, user):
    """The accounts of every device of `user`, then their role."""
    return [{"command": "deleteClient", "username": name}
            for name in broker_roles.device_accounts(user, MAX_DEVICES)] + [
        {"command": "deleteRole", "rolename": role_name}]


KINDS = {"rider": "rider", "vehicle": "vehicles"}


# Marks, among a client's roles in `clients()`, one bound to no client id (or another): an account of before A4.
UNBOUND = "(unbound)"


def clients(args, names):
    """What the broker holds of each name: {name: set of its role names}, without the names it does not know."""
    commands = [{"command": "getClient", "username": name} for name in names]
    held = {}
    for start in range(0, len(commands), 300):
        batch = commands[start:start + 300]
        responses = request(args, batch)
        check(batch, responses)
        for command, response in zip(batch, responses):
            client = (response.get("data") or {}).get("client")
            if client:
                held[command["username"]] = {role["rolename"] for role in client.get("roles", [])}
                if client.get("clientid") != broker_roles.client_id(command["username"]):
                    held[command["username"]].add(UNBOUND)
    return held


def one_name_space(args, kind, names):
    """Refuses a name that the broker holds for another kind or role: a name is a rider's or a vehicle's, never
    both (add-rider for a vehicle's name would hand out the vehicle's password; remove-rider would delete it)."""
    own = f"{KINDS[kind]}-"
    held = clients(args, names)
    for name, roles in held.items():
        strangers = sorted(role for role in roles if role not in (own + name, UNBOUND))
        if strangers:
            sys.exit(f"broker-accounts: '{name}' is already an account with the role {strangers[0]}, not a {kind}'s: "
                     f"a name is a rider's or a vehicle's, never both (A4); choose another name")
    return held


def upgrade(args, listed):
    """An existing broker brought to A4 in one command; safe to run again. Existing accounts keep their passwords
    (but a name that was both a rider's and a vehicle's, whose password the rider knows)."""
    commands = [{"command": "setDefaultACLAccess", "acls": [
        {"acltype": kind, "allow": allow} for kind, allow in DEFAULT_ACCESS.items()]}]
    for role in broker_roles.CERTIFICATE_ONLY:
        for user in listed.get(role, []):
            commands += [{"command": "deleteClient", "username": user},
                         {"command": "deleteRole", "rolename": f"{role}-{user}"}]
    check(commands, request(args, commands))
    answer = request(args, [{"command": "listClients", "verbose": True}])
    check([{"command": "listClients"}], answer)
    bound, collisions, fixes = [], [], []
    admin_unbound = False
    names = set()
    for client in (answer[0].get("data") or {}).get("clients", []):
        name = client["username"]
        names.add(name)
        roles = {role["rolename"] for role in client.get("roles", [])}
        if client.get("clientid") != broker_roles.client_id(name):
            if name == ADMIN:
                admin_unbound = True  # last: binding it ends this connection
            else:
                fixes.append({"command": "setClientId", "username": name, "clientid": broker_roles.client_id(name)})
            bound.append(name)
        if f"rider-{name}" in roles and f"vehicles-{name}" in roles:
            path = os.path.join(args.secrets, name)
            if os.path.exists(path):
                os.remove(path)
            password, _ = secret(args.secrets, name, create=True)
            fixes += [{"command": "removeClientRole", "username": name, "rolename": f"rider-{name}"},
                      {"command": "deleteRole", "rolename": f"rider-{name}"},
                      {"command": "setClientPassword", "username": name, "password": password}]
            collisions.append(name)
    if fixes:
        run_batch(args, fixes)
    # The accounts listed since (ride-watch's, say), made as provision makes them; existing ones untouched.
    run_batch(args, [command for role, rules in broker_roles.ROLES.items() if role not in broker_roles.CERTIFICATE_ONLY
                     for user in listed.get(role, []) if user not in names
                     for command in account(f"{role}-{valid(user)}", rules, user, args.static_secrets)])
    if admin_unbound:
        send_only(args, [{"command": "setClientId", "username": ADMIN, "clientid": broker_roles.client_id(ADMIN)}])
        admin = request(args, [{"command": "getClient", "username": ADMIN}])[0]
        if (admin.get("data") or {}).get("client", {}).get("clientid") != broker_roles.client_id(ADMIN):
            sys.exit("broker-accounts: upgrade: the accounts admin is not bound to its client id; run it again")
    print(f"broker-accounts: upgrade: receiving denied by default; {len(bound)} accounts bound to their names; "
          f"the password listener's worker account removed")
    for name in collisions:
        print(f"broker-accounts: upgrade: '{name}' was both a vehicle and a rider: it stays the vehicle, with a new "
              f"password in {args.secrets}/{name} for its devices; issue the rider again under another name")


def run_batch(args, commands):
    # One message per 300 commands: the plugin rewrites its whole file after each change anyway, and a message
    # stays small. The clients found existing carry over, so that an account split across two batches still
    # takes 2.0.11's "Internal error" on linking its role again as harmless.
    existing = set()
    for start in range(0, len(commands), 300):
        batch = commands[start:start + 300]
        check(batch, request(args, batch), existing)


def send_only(args, commands):
    """Publishes the commands and waits only for the broker to take them (PUBACK): for a change that ends this very
    connection (binding the admin's own client id disconnects it), whose answer never arrives."""
    import paho.mqtt.client as mqtt

    password, _ = secret(args.secrets, ADMIN, create=False)
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=broker_roles.client_id(ADMIN),
                         protocol=mqtt.MQTTv311, reconnect_on_failure=False)
    client.username_pw_set(ADMIN, password)
    client.tls_set(ca_certs=args.cafile)
    client.connect(args.host, args.port, keepalive=30)
    client.loop_start()
    info = client.publish(CONTROL, json.dumps({"commands": commands}), qos=1)
    info.wait_for_publish(args.timeout)
    client.loop_stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["init", "provision", "add-rider", "remove-rider", "add-vehicle",
                                            "remove-vehicle", "upgrade"])
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
    parser.add_argument("--devices", type=int, default=1,
                        help=f"add-rider, add-vehicle: accounts per name (1 to {MAX_DEVICES}): NAME, NAME~2, ...")
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
            if role in broker_roles.CERTIFICATE_ONLY:
                continue
            for user in listed.get(role, []):
                role_name = f"{role}-{valid(user)}"
                configuration["roles"].append({"rolename": role_name, "acls": broker_roles.dynsec_acls(rules, user)})
                configuration["clients"].append(
                    dict({"username": user, "clientid": broker_roles.client_id(user), "roles": [{"rolename": role_name}]},
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
    # One admin at a time: the admin's client id is bound (A4), so two at once would cut each other off.
    os.makedirs(args.secrets, mode=0o700, exist_ok=True)
    lock = open(os.path.join(args.secrets, ".broker-accounts.lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    if args.command == "upgrade":
        upgrade(args, listed)
        return
    if not 1 <= args.devices <= MAX_DEVICES:
        sys.exit(f"broker-accounts: --devices takes 1 to {MAX_DEVICES}")
    commands = []
    if args.command == "provision":
        wanted = [(role, rules, valid(user)) for role, rules in broker_roles.ROLES.items()
                  if role not in broker_roles.CERTIFICATE_ONLY for user in listed.get(role, [])]
        # Existing accounts keep their passwords: a wrong --static-secrets must not lock every service out.
        existing = clients(args, [user for _, _, user in wanted])
        for role, rules, user in wanted:
            if user in existing:
                if f"{role}-{user}" not in existing[user]:
                    sys.exit(f"broker-accounts: '{user}' exists with the roles {sorted(existing[user])}, not "
                             f"{role}-{user}: a name is one account's (A4); remove it first")
                continue
            commands += account(f"{role}-{user}", rules, user, args.static_secrets)
    else:
        kind = args.command.split("-", 1)[1]
        for name in args.names:
            if reserved(name):
                sys.exit(f"broker-accounts: '{name}' is reserved: a worker's client id or a service's name (A4)")
        held = one_name_space(args, kind, args.names)
        if args.command.startswith("add"):
            rules = broker_roles.RIDER if kind == "rider" else broker_roles.VEHICLE
            for name in args.names:
                commands += account(f"{KINDS[kind]}-{name}", rules, name, args.secrets, args.devices)
                if UNBOUND in held.get(name, ()):
                    # An account of before A4: bound now (its connections end, and come back under its name).
                    commands.append({"command": "setClientId", "username": name,
                                     "clientid": broker_roles.client_id(name)})
        else:
            for name in args.names:
                commands += removal(f"{KINDS[kind]}-{name}", name)
    if not commands:
        if args.command == "provision":
            print("broker-accounts: provision: every account exists")
            return
        sys.exit("broker-accounts: no account named")
    run_batch(args, commands)
    if args.command.startswith("remove"):
        for name in args.names:
            for device in broker_roles.device_accounts(name, MAX_DEVICES):
                path = os.path.join(args.secrets, device)
                if os.path.exists(path):
                    os.remove(path)
    print(f"broker-accounts: {args.command}: {len(args.names) or len(static) - 1} accounts")


if __name__ == "__main__":
    main()
