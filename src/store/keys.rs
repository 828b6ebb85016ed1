//! Every Redis key and channel Flagpole uses, built in one place.
//!
//! All configuration keys of one installation share the hash tag `{<prefix>}`, so the commit
//! script (which touches them together) also works on Redis Cluster; the delivery and
//! rate-limit keys share it too, since the commit script queues deliveries and the delivery
//! scripts read the addons. Usage keys are `<prefix>:usage:<kind>:…` without a hash tag on a
//! standalone Redis or behind Sentinel; on Redis Cluster they share a tag of their own,
//! `{<prefix>:usage}` (`Keys::for_cluster`), because the flush script and the usage pipelines
//! touch many of them at once and Cluster wants every key of a script or pipeline in one slot.
//! So an installation uses two slots of a cluster. An application's name always comes last,
//! after a prefix of its own per kind, so no name can reach another application's keys.

use super::Collection;

/// The consumer group of the `deliveries` stream, shared by every replica's delivery worker.
pub const DELIVERY_GROUP: &str = "flagpole-delivery";

/// Builds the keys of one installation.
#[derive(Debug, Clone)]
pub struct Keys {
    tag: String,
    usage: String,
}

impl Keys {
    /// Keys under `prefix` (the `--key-prefix` setting).
    pub fn new(prefix: &str) -> Self {
        Self {
            tag: format!("{{{prefix}}}"),
            usage: format!("{prefix}:usage"),
        }
    }

    /// Keys under `prefix` for Redis Cluster: the usage keys share the hash tag
    /// `{<prefix>:usage}` (see the module documentation).
    pub fn for_cluster(prefix: &str) -> Self {
        Self {
            tag: format!("{{{prefix}}}"),
            usage: format!("{{{prefix}:usage}}"),
        }
    }

    /// Hash, record key → JSON document, one per collection; no TTL; written by the commit
    /// script only.
    pub fn collection(&self, collection: Collection) -> String {
        format!("{}:{}", self.tag, collection.as_str())
    }

    /// String, integer version of the configuration; no TTL; INCR by the commit script.
    pub fn version(&self) -> String {
        format!("{}:version", self.tag)
    }

    /// String, the random id of the latest commit (see `store::Position`); SET by the commit
    /// script; no TTL.
    pub fn head(&self) -> String {
        format!("{}:head", self.tag)
    }

    /// Hash, what the commit script needs to commit a batch on top of other replicas' writes
    /// (`store::Rebase`): `t/<toggle name>` = the version that last wrote the toggle's active
    /// or archived record, `shared` = the version that last wrote a record of any other
    /// collection, `tracked` and `tracked_from` = the last version and the first of the
    /// unbroken run of versions that kept these marks (a commit by an older binary breaks the
    /// run), `h/<version mod 2048>` = `<version> <commit id>` (the rebase check's proof that a
    /// position is in the store's history, without reading a whole change-log entry). No TTL;
    /// written by the commit script only. Marks of deleted toggles stay (one field per name
    /// ever used).
    pub fn commit_marks(&self) -> String {
        format!("{}:commit_marks", self.tag)
    }

    /// Stream, entry id `<version>-0`, fields `head` = the commit's id and `changes` = JSON array
    /// of changes (`null` when larger than `LOGGED_CHANGES_MAX`: readers reload); trimmed to about
    /// `CHANGE_LOG_LENGTH` entries; appended by the commit script.
    pub fn changes(&self) -> String {
        format!("{}:changes", self.tag)
    }

    /// Stream, entry id `<event id>-0`, field `event` = JSON event record; never trimmed (the
    /// audit log); appended by the commit script.
    pub fn events(&self) -> String {
        format!("{}:events", self.tag)
    }

    /// Stream, entry id `<version>-0`, fields `at` = epoch ms of the commit and `touched` = JSON
    /// `stream_log::Touched` (the toggles, segments and environments the version wrote);
    /// appended by the commit script, trimmed by it to about `StreamLogRetention::max_entries`
    /// entries and `max_age`; read by streaming clients' resumption (`Last-Event-ID`).
    pub fn stream_log(&self) -> String {
        format!("{}:stream-log", self.tag)
    }

    /// List, the ids of the events about toggle `name`, oldest first; no TTL; RPUSH by the
    /// commit script.
    pub fn toggle_events(&self, name: &str) -> String {
        format!("{}:toggle-events:{name}", self.tag)
    }

    /// String, last assigned event id; INCR by the commit script.
    pub fn event_seq(&self) -> String {
        format!("{}:event_seq", self.tag)
    }

    /// Pub/sub channel carrying each new position (`<version> <head> <previous head>`, then the
    /// changes when small: see `store::announced`); published by the commit script.
    pub fn notify_channel(&self) -> String {
        format!("{}:notify", self.tag)
    }

    /// Stream of delivery jobs, field `job` = JSON `DeliveryJob`; read through the consumer
    /// group `DELIVERY_GROUP`; appended by the commit script (and by retries and redeliveries),
    /// each entry deleted once settled, so it holds only unsettled jobs.
    pub fn deliveries(&self) -> String {
        format!("{}:deliveries", self.tag)
    }

    /// Sorted set, JSON `DeliveryJob` scored by the epoch milliseconds its next attempt is due;
    /// added by the settle script, moved back into `deliveries` when due by the promote script.
    pub fn delivery_retries(&self) -> String {
        format!("{}:delivery-retries", self.tag)
    }

    /// Stream, the dead letters of addon `addon`: fields `job` (JSON `DeliveryJob`), `error`,
    /// `at` (RFC 3339); appended by the settle script, entries deleted when redelivered; never
    /// trimmed (deleted with the addon).
    pub fn delivery_dead(&self, addon: u64) -> String {
        format!("{}:delivery-dead:{addon}", self.tag)
    }

    /// Hash, delivery id → entry id of its dead letter in `delivery_dead`; HSET by the settle
    /// script with the dead letter, HDEL by the redeliver script.
    pub fn delivery_dead_index(&self, addon: u64) -> String {
        format!("{}:delivery-dead-index:{addon}", self.tag)
    }

    /// Hash, delivery id → JSON `DeliveryRecord` of addon `addon`'s deliveries; written by the
    /// commit, settle and redeliver scripts; trimmed with `delivery_recent` to `LOG_LENGTH`.
    pub fn delivery_log(&self, addon: u64) -> String {
        format!("{}:delivery-log:{addon}", self.tag)
    }

    /// Sorted set, addon `addon`'s delivery ids scored by event id (the order of its log).
    pub fn delivery_recent(&self, addon: u64) -> String {
        format!("{}:delivery-recent:{addon}", self.tag)
    }

    /// String, the replica that commits the installation's admin writes (`forwarding`):
    /// `<token> <url>`; set with a TTL and renewed by its holder, deleted when it stops.
    pub fn committer(&self) -> String {
        format!("{}:committer", self.tag)
    }

    /// Hash, one rate-limit token bucket: `t` = epoch ms of its last report, `v` = tokens;
    /// written by the rate-limit script of every replica; expires when it would be full again.
    /// `key` is a token's SHA-256 prefix or a client IP.
    pub fn rate_bucket(&self, group: &str, key: &str) -> String {
        format!("{}:rate:{group}:{key}", self.tag)
    }

    /// Hash, the evaluations counted in one minute (minutes since the epoch): field
    /// `<toggle>|<app>|y` and `…|n` = yes/no counts, `<toggle>|<app>|v|<variant>` = variant
    /// counts (each part escaped, see `store::usage::redis_fields::field`); EXPIREAT 65 minutes after
    /// the minute; HINCRBY by the usage flush.
    pub fn usage_counts(&self, minute: u64) -> String {
        format!("{}:counts:{minute}", self.usage)
    }

    /// Hash, the evaluations of one toggle counted in one hour (hours since the epoch): field
    /// `<app>|y` and `…|n` = yes/no counts, `<app>|v|<variant>` = variant counts (each part
    /// escaped, see `store::usage::redis_fields::field`); EXPIREAT 49 hours after the hour; HINCRBY
    /// by the same usage flush (the same script) that writes `usage_counts`. The toggle's name
    /// comes last, after the hour.
    pub fn usage_hour_counts(&self, hour: u64, toggle: &str) -> String {
        format!("{}:hours:{hour}:{toggle}", self.usage)
    }

    /// Sorted set, application name scored by last-seen epoch milliseconds; ZADD GT by the
    /// usage flush, trimmed to two days by the usage trim.
    pub fn usage_apps(&self) -> String {
        format!("{}:apps", self.usage)
    }

    /// Hash, one application: `createdAt`, `updatedAt` (epoch ms), `strategies` (JSON array of
    /// its latest registration), `metricsCount` (HINCRBY), `metadata` (JSON: description, url,
    /// color, icon, set by the admin API); deleted with the application.
    pub fn usage_app(&self, app: &str) -> String {
        format!("{}:app:{app}", self.usage)
    }

    /// Sorted set, the instances of `app` scored by last-seen epoch milliseconds (ZADD GT);
    /// trimmed to two days.
    pub fn usage_instances(&self, app: &str) -> String {
        format!("{}:instances:{app}", self.usage)
    }

    /// Sorted set, the instances of `app` scored by first-seen epoch milliseconds (ZADD NX);
    /// trimmed with `usage_instances`.
    pub fn usage_instances_first_seen(&self, app: &str) -> String {
        format!("{}:first-seen:{app}", self.usage)
    }

    /// Hash, instance id → client IP of its latest contact; trimmed with `usage_instances`.
    pub fn usage_instance_ips(&self, app: &str) -> String {
        format!("{}:ips:{app}", self.usage)
    }

    /// Hash, instance id → JSON `RegistrationRecord` of its latest registration; trimmed with
    /// `usage_instances`.
    pub fn usage_registrations(&self, app: &str) -> String {
        format!("{}:registrations:{app}", self.usage)
    }

    /// Hash, instance id → JSON `PollRecord` (the configuration it holds); trimmed with
    /// `usage_instances`.
    pub fn usage_polls(&self, app: &str) -> String {
        format!("{}:polls:{app}", self.usage)
    }

    /// Sorted set, the toggles `app` reported, scored by last-reported epoch milliseconds
    /// (ZADD GT); trimmed to two days.
    pub fn usage_seen_toggles(&self, app: &str) -> String {
        format!("{}:toggles:{app}", self.usage)
    }

    /// String, marks a usage flush part as applied (or voided, so it never will be); SET NX by
    /// the flush script and by settling a part whose write went unconfirmed; expires after
    /// two hours.
    pub fn usage_flush_marker(&self, id: u64) -> String {
        format!("{}:flush:{id:016x}", self.usage)
    }

    /// Every per-application key of `app`, for deleting it.
    pub fn usage_app_keys(&self, app: &str) -> [String; 7] {
        [
            self.usage_app(app),
            self.usage_instances(app),
            self.usage_instances_first_seen(app),
            self.usage_instance_ips(app),
            self.usage_registrations(app),
            self.usage_polls(app),
            self.usage_seen_toggles(app),
        ]
    }
}
