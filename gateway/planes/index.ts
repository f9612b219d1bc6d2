// The gateway's client of plane agents.
export { connectPlane, PlaneSession, probePlane, transportFor, type ConnectOptions, type StepOptions } from './session.ts';
export { GrpcTransport } from './grpc-client.ts';
export { HttpTransport } from './http-client.ts';
export { openCdpStream, warmCdpChannel, type CdpStream, type CdpStreamOptions } from './cdp-client.ts';
export * from './types.ts';
