// Original file: proto/plane.proto


export interface CdpFrame {
  'data'?: (string);
}

export interface CdpFrame__Output {
  'data': (string);
}
