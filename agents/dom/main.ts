// dom_plane agent process: `npm run agent:dom`.
import { runAgentMain } from '../core/serve.ts';
import { domPlane } from './session.ts';

await runAgentMain(domPlane);
