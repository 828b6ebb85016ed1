//! API token use-cases. Tokens are part of the configuration snapshot, so every replica checks
//! them from memory, and a revocation or a new expiry takes effect everywhere with the version
//! that carries it.

use serde_json::json;

use super::{Actor, Plan, Service, ServiceError};
use crate::domain::api_token::{hash_secret, ApiToken, TokenExpiry, TokenSpec, ID_LENGTH};
use crate::domain::config_state::ConfigState;
use crate::domain::event::EventKind;
use crate::domain::DomainError;
use crate::store::Collection;

/// The token named by `reference` — its id (listed) or its secret — or 404.
fn existing<'a>(state: &'a ConfigState, reference: &str) -> Result<&'a ApiToken, DomainError> {
    let by_id = || {
        (reference.len() == ID_LENGTH)
            .then(|| state.api_tokens.values().find(|t| t.id() == reference))
            .flatten()
    };
    state
        .api_tokens
        .get(&hash_secret(reference))
        .or_else(by_id)
        .map(|t| &**t)
        .ok_or_else(|| DomainError::NotFound("Could not find this API token".into()))
}

/// The random part of a new secret: 28 random bytes from the operating system, as 56 hex
/// characters (what Unleash puts after `<project>:<environment>.`).
pub fn new_secret() -> Result<String, ServiceError> {
    let mut bytes = [0u8; 28];
    getrandom::fill(&mut bytes)
        .map_err(|e| ServiceError::Internal(format!("no randomness for a token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl Service {
    /// Every token, oldest first.
    pub fn api_tokens(&self) -> Result<Vec<ApiToken>, ServiceError> {
        let state = self.state()?;
        let mut tokens: Vec<ApiToken> = state.api_tokens.values().map(|t| (**t).clone()).collect();
        tokens.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.hash.cmp(&b.hash)));
        Ok(tokens)
    }

    /// Creates a token; returns it with its secret (shown this once).
    pub async fn create_api_token(
        &self,
        actor: &Actor,
        spec: TokenSpec,
    ) -> Result<(ApiToken, String), ServiceError> {
        let random = new_secret()?;
        let (token, secret) = self
            .write(|state, now| {
                let has_environment = |name: &str| state.environments.contains_key(name);
                let (token, secret) = spec.clone().create(&random, state, &has_environment, now)?;
                let mut plan = Plan::new(now, (token.clone(), secret));
                plan.put(Collection::ApiTokens, &token.hash, &token)?;
                plan.event(
                    EventKind::ApiTokenCreated,
                    actor,
                    json!(token.view()),
                    vec![],
                );
                Ok(plan)
            })
            .await?;
        Ok((token, secret))
    }

    /// Sets (or clears) the expiry of the token whose secret is `secret`.
    pub async fn update_api_token(
        &self,
        actor: &Actor,
        secret: &str,
        expiry: TokenExpiry,
    ) -> Result<ApiToken, ServiceError> {
        self.write(|state, now| {
            let existing = existing(state, secret)?;
            let expires_at = expiry.clone().validate(now)?;
            let token = ApiToken {
                expires_at,
                ..existing.clone()
            };
            let mut plan = Plan::new(now, token.clone());
            plan.put(Collection::ApiTokens, &token.hash, &token)?;
            plan.event(
                EventKind::ApiTokenUpdated,
                actor,
                json!(token.view()),
                vec![],
            );
            Ok(plan)
        })
        .await
    }

    /// Revokes the token whose secret is `secret`.
    pub async fn delete_api_token(&self, actor: &Actor, secret: &str) -> Result<(), ServiceError> {
        self.write(|state, now| {
            let token = existing(state, secret)?;
            let mut plan = Plan::new(now, ());
            plan.delete(Collection::ApiTokens, &token.hash);
            plan.event(
                EventKind::ApiTokenDeleted,
                actor,
                json!(token.view()),
                vec![],
            );
            Ok(plan)
        })
        .await
    }
}
