// Original file: proto/plane.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { CdpFrame as _runplane_plane_CdpFrame, CdpFrame__Output as _runplane_plane_CdpFrame__Output } from '../../runplane/plane/CdpFrame.gen.ts';
import type { HealthReply as _runplane_plane_HealthReply, HealthReply__Output as _runplane_plane_HealthReply__Output } from '../../runplane/plane/HealthReply.gen.ts';
import type { HealthRequest as _runplane_plane_HealthRequest, HealthRequest__Output as _runplane_plane_HealthRequest__Output } from '../../runplane/plane/HealthRequest.gen.ts';
import type { PlaneReply as _runplane_plane_PlaneReply, PlaneReply__Output as _runplane_plane_PlaneReply__Output } from '../../runplane/plane/PlaneReply.gen.ts';
import type { PlaneRequest as _runplane_plane_PlaneRequest, PlaneRequest__Output as _runplane_plane_PlaneRequest__Output } from '../../runplane/plane/PlaneRequest.gen.ts';

export interface PlaneAgentClient extends grpc.Client {
  Cdp(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_runplane_plane_CdpFrame, _runplane_plane_CdpFrame__Output>;
  Cdp(options?: grpc.CallOptions): grpc.ClientDuplexStream<_runplane_plane_CdpFrame, _runplane_plane_CdpFrame__Output>;
  cdp(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_runplane_plane_CdpFrame, _runplane_plane_CdpFrame__Output>;
  cdp(options?: grpc.CallOptions): grpc.ClientDuplexStream<_runplane_plane_CdpFrame, _runplane_plane_CdpFrame__Output>;
  
  Health(argument: _runplane_plane_HealthRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_runplane_plane_HealthReply__Output>): grpc.ClientUnaryCall;
  Health(argument: _runplane_plane_HealthRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_runplane_plane_HealthReply__Output>): grpc.ClientUnaryCall;
  Health(argument: _runplane_plane_HealthRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_runplane_plane_HealthReply__Output>): grpc.ClientUnaryCall;
  Health(argument: _runplane_plane_HealthRequest, callback: grpc.requestCallback<_runplane_plane_HealthReply__Output>): grpc.ClientUnaryCall;
  health(argument: _runplane_plane_HealthRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_runplane_plane_HealthReply__Output>): grpc.ClientUnaryCall;
  health(argument: _runplane_plane_HealthRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_runplane_plane_HealthReply__Output>): grpc.ClientUnaryCall;
  health(argument: _runplane_plane_HealthRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_runplane_plane_HealthReply__Output>): grpc.ClientUnaryCall;
  health(argument: _runplane_plane_HealthRequest, callback: grpc.requestCallback<_runplane_plane_HealthReply__Output>): grpc.ClientUnaryCall;
  
  Session(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_runplane_plane_PlaneRequest, _runplane_plane_PlaneReply__Output>;
  Session(options?: grpc.CallOptions): grpc.ClientDuplexStream<_runplane_plane_PlaneRequest, _runplane_plane_PlaneReply__Output>;
  session(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_runplane_plane_PlaneRequest, _runplane_plane_PlaneReply__Output>;
  session(options?: grpc.CallOptions): grpc.ClientDuplexStream<_runplane_plane_PlaneRequest, _runplane_plane_PlaneReply__Output>;
  
}

export interface PlaneAgentHandlers extends grpc.UntypedServiceImplementation {
  Cdp: grpc.handleBidiStreamingCall<_runplane_plane_CdpFrame__Output, _runplane_plane_CdpFrame>;
  
  Health: grpc.handleUnaryCall<_runplane_plane_HealthRequest__Output, _runplane_plane_HealthReply>;
  
  Session: grpc.handleBidiStreamingCall<_runplane_plane_PlaneRequest__Output, _runplane_plane_PlaneReply>;
  
}

export interface PlaneAgentDefinition extends grpc.ServiceDefinition {
  Cdp: MethodDefinition<_runplane_plane_CdpFrame, _runplane_plane_CdpFrame, _runplane_plane_CdpFrame__Output, _runplane_plane_CdpFrame__Output>
  Health: MethodDefinition<_runplane_plane_HealthRequest, _runplane_plane_HealthReply, _runplane_plane_HealthRequest__Output, _runplane_plane_HealthReply__Output>
  Session: MethodDefinition<_runplane_plane_PlaneRequest, _runplane_plane_PlaneReply, _runplane_plane_PlaneRequest__Output, _runplane_plane_PlaneReply__Output>
}
