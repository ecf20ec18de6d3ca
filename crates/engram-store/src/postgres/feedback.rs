//! Feedback on earlier answers on PostgreSQL, one row per submission.

use async_trait::async_trait;
use engram_types::OrgId;

use super::PgStore;
use crate::{FeedbackRecord, FeedbackStore, StoreResult};

#[async_trait]
impl FeedbackStore for PgStore {
    async fn insert_feedback(&self, feedback: &FeedbackRecord) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO feedback (feedback_id, org_id, request_id, database, collection, body, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&feedback.feedback_id)
        .bind(feedback.org.as_str())
        .bind(&feedback.request_id)
        .bind(&feedback.database)
        .bind(&feedback.collection)
        .bind(&feedback.body)
        .bind(feedback.created_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn feedback_for(
        &self,
        org: &OrgId,
        request_id: &str,
    ) -> StoreResult<Vec<FeedbackRecord>> {
        let rows = sqlx::query(
            "SELECT * FROM feedback WHERE org_id = $1 AND request_id = $2 ORDER BY created_at, feedback_id",
        )
        .bind(org.as_str())
        .bind(request_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(crate::rows::feedback).collect()
    }
}
