//! Addon delivery use-cases for operators: the deliveries log, the dead letters, and
//! redelivery. The queue itself is written by commits and the delivery worker.

use chrono::Utc;

use super::{Service, ServiceError};
use crate::domain::delivery::DeliveryRecord;
use crate::domain::DomainError;
use crate::store::delivery::{DeadLetter, Redelivery};

/// Dead letters one `redeliver-all-dead` request queues at most (each is one store call).
pub const REDELIVER_AT_ONCE: usize = 1000;

impl Service {
    /// The id of addon `id`, or 404.
    fn addon_id(&self, id: &str) -> Result<u64, ServiceError> {
        let state = self.state()?;
        state
            .addons
            .get(id)
            .map(|a| a.id)
            .ok_or_else(|| DomainError::NotFound(format!("Could not find addon {id}")).into())
    }

    /// The addon's latest deliveries, newest first.
    pub async fn deliveries(
        &self,
        addon: &str,
        limit: usize,
    ) -> Result<Vec<DeliveryRecord>, ServiceError> {
        let id = self.addon_id(addon)?;
        Ok(self.store.deliveries().records(id, limit).await?)
    }

    /// The addon's oldest dead letters (at most `limit`) and how many it has.
    pub async fn dead_letters(
        &self,
        addon: &str,
        limit: usize,
    ) -> Result<(Vec<DeadLetter>, u64), ServiceError> {
        let id = self.addon_id(addon)?;
        Ok(self.store.deliveries().dead_letters(id, limit).await?)
    }

    /// The store's current configuration version: a redelivery is judged against at least
    /// the configuration that was committed before it was asked for (a fixed URL or token).
    async fn current_version(&self) -> Result<u64, ServiceError> {
        Ok(self.store.position().await?.version)
    }

    /// Queues delivery `delivery` of the addon again (a dead letter, or one delivered or
    /// dropped); 409 while it is still queued or retrying.
    pub async fn redeliver(&self, addon: &str, delivery: &str) -> Result<(), ServiceError> {
        let id = self.addon_id(addon)?;
        let version = self.current_version().await?;
        match self
            .store
            .deliveries()
            .redeliver(id, delivery, Utc::now(), version)
            .await?
        {
            Redelivery::Queued => Ok(()),
            Redelivery::Unknown => Err(DomainError::NotFound(format!(
                "Addon {addon} has no delivery {delivery}"
            ))
            .into()),
            Redelivery::Pending => Err(DomainError::InUse(format!(
                "Delivery {delivery} is queued or waiting for a retry already"
            ))
            .into()),
        }
    }

    /// Queues the addon's oldest dead letters again, at most `REDELIVER_AT_ONCE`; how many
    /// were queued and how many are left (ask again for those).
    pub async fn redeliver_dead(&self, addon: &str) -> Result<(usize, u64), ServiceError> {
        let id = self.addon_id(addon)?;
        let version = self.current_version().await?;
        Ok(self
            .store
            .deliveries()
            .redeliver_dead(id, Utc::now(), version, REDELIVER_AT_ONCE)
            .await?)
    }
}
