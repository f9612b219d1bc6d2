// The per-URL context budget: how many model calls (turns and questions, each
// with a screenshot of the page) a run may spend while its page is on one URL,
// across all its steps. A run that keeps asking the model about the same page
// is stuck in a way no single step's max_steps sees (a loop of brain steps, a
// retry of a long one); past the budget the model is not called again on that
// URL and the step fails budget_exceeded (spec: "per-URL context budget
// tripped"). SERVICE_URL_CONTEXT_BUDGET, 0 turns it off.
import { BrainError, type Brain, type Frame } from '../plugins/contract.ts';

/** The page a call is about: its URL without the fragment, or '' when the plane cannot tell. */
function pageOf(frames: Frame[]): string {
  const url = frames.find((f) => typeof f.url === 'string' && f.url !== '')?.url ?? '';
  const hash = url.indexOf('#');
  return hash >= 0 ? url.slice(0, hash) : url;
}

export class UrlContextBudget {
  private readonly spent = new Map<string, number>();

  constructor(private readonly limit: number) {}

  private charge(frames: Frame[]): void {
    if (this.limit <= 0) return;
    const page = pageOf(frames);
    // a plane that cannot tell the URL is not charged: one budget for every unknown page would trip on long runs
    if (page === '') return;
    const n = (this.spent.get(page) ?? 0) + 1;
    if (n > this.limit) {
      throw new BrainError('budget_exceeded', `the per-URL context budget is spent: ${this.limit} model calls on ${page.slice(0, 300)} (SERVICE_URL_CONTEXT_BUDGET)`);
    }
    this.spent.set(page, n);
  }

  /** `brain`, charged to this budget on every call. */
  wrap(brain: Brain): Brain;
  wrap(brain: Brain | undefined): Brain | undefined;
  wrap(brain: Brain | undefined): Brain | undefined {
    if (!brain || this.limit <= 0) return brain;
    const ask = brain.ask?.bind(brain);
    return {
      id: brain.id,
      ...(brain.description ? { description: brain.description } : {}),
      think: (frames, ...rest) => {
        this.charge(frames);
        return brain.think(frames, ...rest);
      },
      ...(ask
        ? {
            ask: (frames: Frame[], ...rest: [string, AbortSignal?, Parameters<NonNullable<Brain['ask']>>[3]?]) => {
              this.charge(frames);
              return ask(frames, ...rest);
            },
          }
        : {}),
    };
  }
}
