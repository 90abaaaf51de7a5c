"""broker_roles.py: what each role may do on the broker, one source for both ways the project grants it.

scripts/broker-security.py writes it as mosquitto's acl_file (the workers' certificate listener, and the account
listener of a deployment without the dynamic security plugin); scripts/broker-accounts.py writes it as the plugin's
roles (accounts created, changed and removed while the broker runs). Topic prefixes are the worker's (`topics.*` in
config/worker.yaml), the contract's defaults unless changed there.

Each rule is (access, topic): access is "read", "write" or "readwrite"; "{user}" stands for the account's name
(a vehicle id, a ride id), which the acl_file writes as a `pattern` with %u and the plugin as one role per
account (mosquitto 2.0's plugin substitutes no %u).

A4: every account of the plugin is bound to one client id, its own name (`client_id`), so that no account can
connect under a client id that is another's and take its session. A second device of a rider or a vehicle's driver
app is an account of its own (`NAME~2`, `NAME~3`: `~` is not in I1, so no ride or vehicle is called that) linked to
the same role. The workers sign in on their certificate listener only, and their client ids
(`ride-status-worker-{id}`) are no account's name."""

import os

# The topic prefixes of the contract, under the worker's setting names (`topics.*`): the roles follow the worker's
# configuration file (config/worker.yaml, or RIDESTATUS_WORKER_CONFIG). BrokerRoleTopicsTests checks every rule
# against RideStatusKit's topic table (RideTopics), with the defaults and with other prefixes.
DEFAULT_TOPICS = {"fleetPrefix": "fleet", "ridesPrefix": "rides", "serviceName": "ridestatus",
                  "rideOptionsPrefix": "ride-options", "replyPrefix": "replies"}


def configured_topics(path=None):
    """The `topics:` section of the worker's configuration file, where one is; the defaults otherwise."""
    path = path or os.environ.get("RIDESTATUS_WORKER_CONFIG") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "config", "worker.yaml")
    topics = dict(DEFAULT_TOPICS)
    if os.path.exists(path):
        import yaml  # installed by scripts/install-deps.sh; only needed when a file is read
        with open(path) as handle:
            section = (yaml.safe_load(handle) or {}).get("topics") or {}
        topics.update({key: str(value) for key, value in section.items() if key in DEFAULT_TOPICS})
    return topics


def roles(topics=None):
    """Each role's rules under these prefixes (the contract's defaults where one is not given)."""
    t = dict(DEFAULT_TOPICS, **(topics or {}))
    fleet, rides, service = t["fleetPrefix"], t["ridesPrefix"], t["serviceName"]
    options, replies = t["rideOptionsPrefix"], t["replyPrefix"]
    controls = ("start", "assign", "event", "cancel", "stop", "route")
    worker = [
        ("read", f"{fleet}/vehicles/+/position"),
        ("read", f"{fleet}/vehicles/+/availability"),
        ("read", f"{fleet}/vehicles/+/event"),
        *[("read", f"{rides}/+/{kind}") for kind in controls],
        ("read", f"{rides}/+/status/get"),
        ("readwrite", f"{rides}/+/status"),
        # Each of the workers' own topics by name, so that the push registrations (push tokens) under
        # {service}/push/ stay ride-push's alone.
        ("write", f"{service}/deadletter"),
        ("readwrite", f"{service}/workers/+"),
        ("readwrite", f"{service}/workers/+/released"),
        ("readwrite", f"{service}/workers/+/load"),
        ("readwrite", f"{service}/workers/+/recovery"),
        ("readwrite", f"{service}/workers/+/lease"),
        ("readwrite", f"{service}/state/#"),
        ("readwrite", f"{service}/priors/+"),
        ("read", f"{options}/request"),
        ("write", f"{replies}/#"),
    ]
    dispatch = [
        *[("write", f"{rides}/+/{kind}") for kind in controls],
        ("read", f"{rides}/+/status"),
        ("write", f"{rides}/+/status/get"),
        ("read", f"{service}/deadletter"),
        ("read", f"{service}/workers/+"),
        ("write", f"{options}/request"),
        ("read", f"{replies}/{{user}}/#"),
    ]
    monitor = [("read", f"{service}/workers/+"), ("read", f"{service}/deadletter")]
    # ride-watch, the live view of `make run`: every ride's status and the workers' presence; it writes nothing.
    watcher = [("read", f"{rides}/+/status"), ("read", f"{service}/workers/+"), ("read", f"{service}/deadletter")]
    # ride-push: the statuses of the rides it serves, its group's presences, and the registration records, which
    # hold rider devices' push tokens (no other role reads them). One account per member (A4).
    push = [
        ("read", f"{rides}/+/status"),
        ("readwrite", f"{service}/push/members/+"),
        ("readwrite", f"{service}/push/devices/+/+"),
    ]
    # A vehicle and the driver app in it: its own position, availability and driver events (A3: the worker applies
    # an event only for the ride this vehicle is assigned to).
    vehicle = [
        ("write", f"{fleet}/vehicles/{{user}}/position"),
        ("write", f"{fleet}/vehicles/{{user}}/availability"),
        ("write", f"{fleet}/vehicles/{{user}}/event"),
    ]
    simulator = [
        ("write", f"{fleet}/vehicles/+/position"),
        ("write", f"{fleet}/vehicles/+/availability"),
        ("write", f"{fleet}/vehicles/+/event"),
        *[("write", f"{rides}/+/{kind}") for kind in ("start", "assign", "cancel", "stop", "route")],
        ("write", f"{options}/request"),
        ("read", f"{replies}/{{user}}/#"),
    ]
    # A rider: the username is the ride identifier, issued per ride: that ride's status, its status/get, replies
    # under {replies}/{ride}/, and quotes.
    rider = [
        ("read", f"{rides}/{{user}}/status"),
        ("write", f"{rides}/{{user}}/status/get"),
        ("read", f"{replies}/{{user}}/#"),
        ("write", f"{options}/request"),
    ]
    # Role names of accounts.yaml, with their rules; "rider" is the role of every ride's own account.
    return {"worker": worker, "dispatch": dispatch, "monitoring": monitor, "watchers": watcher, "push": push,
            "vehicles": vehicle, "simulators": simulator, "rider": rider}


_CONFIGURED = roles(configured_topics())
# The rider's role is made per ride; the others are accounts.yaml's roles.
RIDER = _CONFIGURED.pop("rider")
ROLES = _CONFIGURED
WORKER, DISPATCH, MONITOR, WATCHER = ROLES["worker"], ROLES["dispatch"], ROLES["monitoring"], ROLES["watchers"]
PUSH, VEHICLE, SIMULATOR = ROLES["push"], ROLES["vehicles"], ROLES["simulators"]

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
