// Original file: proto/plane.proto

import type { Long } from '@grpc/proto-loader';

export interface PlaneReply {
  'call_id'?: (number | string | Long);
  'status'?: (number);
  'body_json'?: (string);
  'blob'?: (Buffer | Uint8Array | string);
}

export interface PlaneReply__Output {
  'call_id': (number);
  'status': (number);
  'body_json': (string);
  'blob': (Buffer);
}
