//! Addon delivery use-cases for operators: the deliveries log, the dead letters, and
//! redelivery. The queue itself is written by commits and the delivery worker.

use chrono::Utc;

use super::{Service, ServiceError};
use crate::domain::delivery::DeliveryRecord;
use crate::domain::DomainError;
use crate::store::delivery::{DeadLetter, Redelivery};

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

    /// The addon's dead letters, oldest first.
    pub async fn dead_letters(&self, addon: &str) -> Result<Vec<DeadLetter>, ServiceError> {
        let id = self.addon_id(addon)?;
        Ok(self.store.deliveries().dead_letters(id).await?)
    }

    /// Queues delivery `delivery` of the addon again (a dead letter, or one delivered or
    /// dropped); 409 while it is still queued or retrying.
    pub async fn redeliver(&self, addon: &str, delivery: &str) -> Result<(), ServiceError> {
        let id = self.addon_id(addon)?;
        match self
            .store
            .deliveries()
            .redeliver(id, delivery, Utc::now())
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

    /// Queues every dead letter of the addon again; how many.
    pub async fn redeliver_dead(&self, addon: &str) -> Result<usize, ServiceError> {
        let id = self.addon_id(addon)?;
        Ok(self
            .store
            .deliveries()
            .redeliver_dead(id, Utc::now())
            .await?)
    }
}
