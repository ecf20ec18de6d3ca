//! Feedback on earlier answers, one row per submission.

use async_trait::async_trait;
use engram_types::OrgId;

use crate::backend::{Backend, Sql, SqlStore};
use crate::{FeedbackRecord, StoreResult};

/// Feedback on earlier answers, per organization.
#[async_trait]
pub trait FeedbackStore: Send + Sync {
    async fn insert_feedback(&self, feedback: &FeedbackRecord) -> StoreResult<()>;
    /// The organization's feedback on one request id, oldest first.
    async fn feedback_for(&self, org: &OrgId, request_id: &str)
        -> StoreResult<Vec<FeedbackRecord>>;
}

#[async_trait]
impl<B: Backend> FeedbackStore for SqlStore<B> {
    async fn insert_feedback(&self, feedback: &FeedbackRecord) -> StoreResult<()> {
        self.run(
            Sql::new(
                "INSERT INTO feedback (feedback_id, org_id, request_id, database, collection, body, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&feedback.feedback_id)
            .bind(feedback.org.as_str())
            .bind(&feedback.request_id)
            .bind(&feedback.database)
            .bind(&feedback.collection)
            .bind(&feedback.body)
            .bind(feedback.created_at),
        )
        .await?;
        Ok(())
    }

    async fn feedback_for(
        &self,
        org: &OrgId,
        request_id: &str,
    ) -> StoreResult<Vec<FeedbackRecord>> {
        let rows = self
            .all(
                Sql::new(
                    "SELECT * FROM feedback WHERE org_id = $1 AND request_id = $2
                     ORDER BY created_at, feedback_id",
                )
                .bind(org.as_str())
                .bind(request_id),
            )
            .await?;
        rows.iter().map(crate::rows::feedback).collect()
    }
}
