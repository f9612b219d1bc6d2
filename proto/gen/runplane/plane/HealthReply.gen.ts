// Original file: proto/plane.proto

import type { Long } from '@grpc/proto-loader';

export interface HealthReply {
  'ok'?: (boolean);
  'backend'?: (string);
  'session_bound'?: (boolean);
  'last_action_unix_ms'?: (number | string | Long);
  'uptime_ms'?: (number | string | Long);
  'pool_ready'?: (number);
  'pool_capacity'?: (number);
}

export interface HealthReply__Output {
  'ok': (boolean);
  'backend': (string);
  'session_bound': (boolean);
  'last_action_unix_ms': (number);
  'uptime_ms': (number);
  'pool_ready': (number);
  'pool_capacity': (number);
}
