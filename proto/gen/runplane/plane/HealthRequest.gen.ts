// Original file: proto/plane.proto


export interface HealthRequest {
}

export interface HealthRequest__Output {
}
