"""broker_roles.py: what each role may do on the broker, one source for both ways the project grants it.

scripts/broker-security.py writes it as mosquitto's acl_file (the workers' certificate listener, and the account
listener of a deployment without the dynamic security plugin); scripts/broker-accounts.py writes it as the plugin's
roles (accounts created, changed and removed while the broker runs). Topic prefixes are the contract's defaults.

Each rule is (access, topic): access is "read", "write" or "readwrite"; "{user}" stands for the account's name
(a vehicle id, a ride id), which the acl_file writes as a `pattern` with %u and the plugin as one role per
account (mosquitto 2.0's plugin substitutes no %u).

A4: every account of the plugin is bound to one client id, its own name (`client_id`), so that no account can
connect under a client id that is another's and take its session. A second device of a rider or a vehicle's driver
app is an account of its own (`NAME~2`, `NAME~3`: `~` is not in I1, so no ride or vehicle is called that) linked to
the same role. The workers sign in on their certificate listener only, and their client ids
(`ride-status-worker-{id}`) are no account's name."""

WORKER = [
    ("read", "fleet/vehicles/+/position"),
    ("read", "fleet/vehicles/+/availability"),
    ("read", "fleet/vehicles/+/event"),
    ("read", "rides/+/start"),
    ("read", "rides/+/assign"),
    ("read", "rides/+/event"),
    ("read", "rides/+/cancel"),
    ("read", "rides/+/stop"),
    ("read", "rides/+/status/get"),
    ("readwrite", "rides/+/status"),
    # Each of the workers' own topics by name, so that the push registrations (push tokens) under
    # ridestatus/push/ stay ride-push's alone.
    ("write", "ridestatus/deadletter"),
    ("readwrite", "ridestatus/workers/+"),
    ("readwrite", "ridestatus/workers/+/released"),
    ("readwrite", "ridestatus/workers/+/load"),
    ("readwrite", "ridestatus/workers/+/recovery"),
    ("readwrite", "ridestatus/workers/+/lease"),
    ("readwrite", "ridestatus/state/#"),
    ("readwrite", "ridestatus/priors/+"),
    ("read", "ride-options/request"),
    ("write", "replies/#"),
]

DISPATCH = [
    ("write", "rides/+/start"),
    ("write", "rides/+/assign"),
    ("write", "rides/+/event"),
    ("write", "rides/+/cancel"),
    ("write", "rides/+/stop"),
    ("read", "rides/+/status"),
    ("write", "rides/+/status/get"),
    ("read", "ridestatus/deadletter"),
    ("read", "ridestatus/workers/+"),
    ("write", "ride-options/request"),
    ("read", "replies/{user}/#"),
]

MONITOR = [("read", "ridestatus/workers/+"), ("read", "ridestatus/deadletter")]

# ride-watch, the live view of `make run`: every ride's status and the workers' presence; it writes nothing.
WATCHER = [("read", "rides/+/status"), ("read", "ridestatus/workers/+"), ("read", "ridestatus/deadletter")]

# ride-push (issue 32): the statuses of the rides it serves, its group's presences, and the registration records,
# which hold rider devices' push tokens (no other role reads them). One account per member (A4).
PUSH = [
    ("read", "rides/+/status"),
    ("readwrite", "ridestatus/push/members/+"),
    ("readwrite", "ridestatus/push/devices/+/+"),
]

# A vehicle and the driver app in it: its own position, availability and driver events (A3: the worker applies an
# event only for the ride this vehicle is assigned to).
VEHICLE = [
    ("write", "fleet/vehicles/{user}/position"),
    ("write", "fleet/vehicles/{user}/availability"),
    ("write", "fleet/vehicles/{user}/event"),
]

SIMULATOR = [
    ("write", "fleet/vehicles/+/position"),
    ("write", "fleet/vehicles/+/availability"),
    ("write", "fleet/vehicles/+/event"),
    ("write", "rides/+/start"),
    ("write", "rides/+/assign"),
    ("write", "rides/+/cancel"),
    ("write", "rides/+/stop"),
    ("write", "ride-options/request"),
    ("read", "replies/{user}/#"),
]

# A rider: the username is the ride identifier, issued per ride: that ride's status, its status/get, replies under
# replies/{ride}/, and quotes.
RIDER = [
    ("read", "rides/{user}/status"),
    ("write", "rides/{user}/status/get"),
    ("read", "replies/{user}/#"),
    ("write", "ride-options/request"),
]

# Role names of accounts.yaml, with their rules.
ROLES = {
    "worker": WORKER,
    "dispatch": DISPATCH,
    "monitoring": MONITOR,
    "watchers": WATCHER,
    "push": PUSH,
    "vehicles": VEHICLE,
    "simulators": SIMULATOR,
}


# Roles whose accounts sign in by certificate only (the workers' listener): none of them is an account of the
# plugin, so no password on the password listener can act as a worker (A4).
CERTIFICATE_ONLY = ("worker",)

# A4: names no rider or vehicle may take (alone or followed by "-..."): the workers' client ids and the services'
# accounts, listed in accounts.yaml or still to be (a second ride-push member, `ride-push-2`).
RESERVED_PREFIXES = ("ride-status-worker", "ride-push", "ride-watch", "fleet-sim", "dispatch", "monitor",
                     "worker", "accounts-admin")

# The suffix of a further device's account: RIDE~2 is the rider's second phone, V~2 a vehicle's driver app.
DEVICE_SEPARATOR = "~"


def client_id(user):
    """A4: the one client id an account may connect with: its own name."""
    return user


def device_accounts(name, devices):
    """The accounts of `name`'s devices: the name itself, then NAME~2 ... NAME~devices."""
    return [name] + [f"{name}{DEVICE_SEPARATOR}{index}" for index in range(2, devices + 1)]


def rules_for(rules, user):
    """The rules with {user} replaced by the account's name."""
    return [(access, topic.replace("{user}", user)) for access, topic in rules]


def dynsec_acls(rules, user):
    """The plugin's ACL entries for these rules: read is receive and subscribe, write is send."""
    acls = []
    for access, topic in rules_for(rules, user):
        if "read" in access:
            acls.append({"acltype": "subscribePattern", "topic": topic, "allow": True})
            acls.append({"acltype": "publishClientReceive", "topic": topic, "allow": True})
        if "write" in access:
            acls.append({"acltype": "publishClientSend", "topic": topic, "allow": True})
    return acls
