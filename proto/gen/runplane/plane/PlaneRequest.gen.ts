// Original file: proto/plane.proto

import type { Long } from '@grpc/proto-loader';

export interface PlaneRequest {
  'call_id'?: (number | string | Long);
  'method'?: (string);
  'step_id'?: (string);
  'body_json'?: (string);
  'session_token'?: (string);
  'deadline_unix_ms'?: (number | string | Long);
  'blob'?: (Buffer | Uint8Array | string);
}

export interface PlaneRequest__Output {
  'call_id': (number);
  'method': (string);
  'step_id': (string);
  'body_json': (string);
  'session_token': (string);
  'deadline_unix_ms': (number);
  'blob': (Buffer);
}
