// The suite's password hashes are cheap: scrypt at N=2^10 instead of the production
// 2^17 (RUNPLANE_TEST_SCRYPT_N, plugins/trace-ingest/auth.ts), in this process and in
// every ingest service and gateway it starts. A hash at 2^17 costs about half a
// CPU-second and the login tests check dozens of passwords (test/trace/login-limits
// spent 40 of its 45 CPU-s in scrypt). The production parameters are tested by
// test/trace/password-rehash.test.ts, which unsets this. An explicit value is kept.
process.env.RUNPLANE_TEST_SCRYPT_N ??= String(2 ** 10);
