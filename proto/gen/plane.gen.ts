import type * as grpc from '@grpc/grpc-js';
import type { MessageTypeDefinition } from '@grpc/proto-loader';

import type { CdpFrame as _runplane_plane_CdpFrame, CdpFrame__Output as _runplane_plane_CdpFrame__Output } from './runplane/plane/CdpFrame.gen.ts';
import type { HealthReply as _runplane_plane_HealthReply, HealthReply__Output as _runplane_plane_HealthReply__Output } from './runplane/plane/HealthReply.gen.ts';
import type { HealthRequest as _runplane_plane_HealthRequest, HealthRequest__Output as _runplane_plane_HealthRequest__Output } from './runplane/plane/HealthRequest.gen.ts';
import type { PlaneAgentClient as _runplane_plane_PlaneAgentClient, PlaneAgentDefinition as _runplane_plane_PlaneAgentDefinition } from './runplane/plane/PlaneAgent.gen.ts';
import type { PlaneReply as _runplane_plane_PlaneReply, PlaneReply__Output as _runplane_plane_PlaneReply__Output } from './runplane/plane/PlaneReply.gen.ts';
import type { PlaneRequest as _runplane_plane_PlaneRequest, PlaneRequest__Output as _runplane_plane_PlaneRequest__Output } from './runplane/plane/PlaneRequest.gen.ts';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  runplane: {
    plane: {
      CdpFrame: MessageTypeDefinition<_runplane_plane_CdpFrame, _runplane_plane_CdpFrame__Output>
      HealthReply: MessageTypeDefinition<_runplane_plane_HealthReply, _runplane_plane_HealthReply__Output>
      HealthRequest: MessageTypeDefinition<_runplane_plane_HealthRequest, _runplane_plane_HealthRequest__Output>
      PlaneAgent: SubtypeConstructor<typeof grpc.Client, _runplane_plane_PlaneAgentClient> & { service: _runplane_plane_PlaneAgentDefinition }
      PlaneReply: MessageTypeDefinition<_runplane_plane_PlaneReply, _runplane_plane_PlaneReply__Output>
      PlaneRequest: MessageTypeDefinition<_runplane_plane_PlaneRequest, _runplane_plane_PlaneRequest__Output>
    }
  }
}

