#!/usr/bin/env node
// The `runplane` command: the compiled CLI, built first when a source is newer than build/.
import { pathToFileURL } from 'node:url';
import { build, builtPath } from '../shared/build.mjs';

await build({ quiet: true });
await import(pathToFileURL(builtPath('cli/main.ts')).href);
