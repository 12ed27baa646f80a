/** Webhook endpoints, their deliveries and each delivery's attempts (see schema.ts for the conventions). */

export type WebhookEndpointStatus = 'enabled' | 'disabled';

export interface WebhookEndpointsTable {
  id: string;
  org_id: string;
  url: string;
  /** JSON array of event types and patterns (`*`, `contact.*`). */
  events: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: string | null;
  status: WebhookEndpointStatus;
  disabled_reason: string | null;
  consecutive_failures: number;
  failing_since: string | null;
  created_by: string;
  created_at: string;
  updated_at: string;
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

export interface WebhookDeliveriesTable {
  /** The Standard Webhooks message id (`msg_…`), the same on every attempt. */
  id: string;
  org_id: string;
  endpoint_id: string;
  /** Null for a test `ping`. */
  event_id: string | null;
  event_type: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: string;
  lease_until: string | null;
  last_attempt_at: string | null;
  last_status: number | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

export interface WebhookAttemptsTable {
  id: string;
  org_id: string;
  delivery_id: string;
  endpoint_id: string;
  attempted_at: string;
  status_code: number | null;
  error: string | null;
  latency_ms: number;
  response_excerpt: string | null;
}
