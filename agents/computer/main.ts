// computer_plane agent process: `npm run agent:computer`.
import { runAgentMain } from '../core/serve.ts';
import { computerPlane } from './session.ts';

await runAgentMain(computerPlane);
