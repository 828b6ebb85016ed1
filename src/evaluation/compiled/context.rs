//! Reading a context field the way unleash-yggdrasil's rules, stickiness and overrides read
//! it (each of the three names fields a little differently).

use std::borrow::Cow;

use unleash_types::client_features::Context;

/// A context field a rule reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    UserId,
    SessionId,
    Environment,
    AppName,
    RemoteAddress,
    /// The context's `currentTime`, or now (to the second) when it has none: what a rule sees.
    CurrentTime,
    /// `currentTime` as given, without now (what a variant override sees).
    GivenCurrentTime,
    Property(Box<str>),
}

impl Field {
    /// The field a constraint's `contextName` (or a rollout's stickiness) names in a rule.
    pub fn in_rule(name: &str) -> Self {
        match name {
            "userId" => Self::UserId,
            "sessionId" => Self::SessionId,
            "currentTime" => Self::CurrentTime,
            "environment" => Self::Environment,
            "appName" => Self::AppName,
            "remoteAddress" => Self::RemoteAddress,
            other => Self::Property(other.into()),
        }
    }

    /// The field a variant's stickiness names (no `currentTime`: it is a property there).
    pub fn for_variant_seed(name: &str) -> Self {
        match name {
            "userId" => Self::UserId,
            "sessionId" => Self::SessionId,
            "environment" => Self::Environment,
            "appName" => Self::AppName,
            "remoteAddress" => Self::RemoteAddress,
            other => Self::Property(other.into()),
        }
    }

    /// The field a variant override's `contextName` names.
    pub fn in_override(name: &str) -> Self {
        match name {
            "currentTime" => Self::GivenCurrentTime,
            other => Self::for_variant_seed(other),
        }
    }

    /// The field's value in `context`, borrowed unless it is now.
    pub fn read<'c>(&self, context: &'c Context) -> Option<Cow<'c, str>> {
        let given = match self {
            Self::UserId => context.user_id.as_deref(),
            Self::SessionId => context.session_id.as_deref(),
            Self::Environment => context.environment.as_deref(),
            Self::AppName => context.app_name.as_deref(),
            Self::RemoteAddress => context.remote_address.as_deref(),
            Self::GivenCurrentTime => context.current_time.as_deref(),
            Self::CurrentTime => {
                return Some(context.current_time.as_deref().map_or_else(
                    || Cow::Owned(chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()),
                    Cow::Borrowed,
                ))
            }
            Self::Property(name) => context
                .properties
                .as_ref()
                .and_then(|p| p.get(&**name))
                .map(String::as_str),
        };
        given.map(Cow::Borrowed)
    }

    /// The field's value when it cannot be now (every field but `CurrentTime`).
    pub fn read_given<'c>(&self, context: &'c Context) -> Option<&'c str> {
        match self.read(context) {
            Some(Cow::Borrowed(value)) => Some(value),
            _ => None,
        }
    }
}
