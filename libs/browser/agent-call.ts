import type { CDPSession, Frame, Page } from 'playwright-core';
import { pageAgentScript } from './page-script/bundle.js';
import { PAGE_AGENT_GLOBAL } from './page-script/page-agent-global.js';

/** The isolated world the page agent lives in, one per document of the page's main frame. */
export const AGENT_WORLD_NAME = 'leasehold-agent';

/**
 * The page agent of one page, in a DevTools isolated world of its main frame. The
 * world shares the page's DOM but none of its JavaScript: page code cannot patch what the agent
 * calls (prototypes, `JSON`, `Array`), cannot see the agent's global, and cannot call it. Same-origin
 * frames are reached from there through `contentDocument`, in the same world. Calls are sent as
 * expressions, never as serialized Node functions, so what a transpiler adds to a function body
 * can never reach the page.
 */
export class PageAgentWorld {
  /** The world's execution context in the current document; null once it may be gone. */
  private contextId: number | null = null;
  private closed = false;

  private readonly closers: (() => Promise<void>)[] = [];

  private constructor(
    /** The page whose frame the world is in (child frames' worlds are found from it). */
    readonly page: Page,
    private readonly session: CDPSession,
    private readonly mainFrameId: string,
  ) {}

  static async open(page: Page): Promise<PageAgentWorld> {
    const session = await page.context().newCDPSession(page);
    const tree = await session.send('Page.getFrameTree');
    return new PageAgentWorld(page, session, tree.frameTree.frame.id);
  }

  /**
   * The agent's world in a child frame of another origin. A frame in a process of its
   * own (site isolation) has a DevTools target of its own; one that shares its page's process is
   * found in the page's frame tree by its URL and name.
   */
  static async openInFrame(page: Page, frame: Frame): Promise<PageAgentWorld> {
    const own = await page
      .context()
      .newCDPSession(frame)
      .catch(() => null);
    if (own) {
      const tree = await own.send('Page.getFrameTree');
      return new PageAgentWorld(page, own, tree.frameTree.frame.id);
    }
    const session = await page.context().newCDPSession(page);
    const tree = await session.send('Page.getFrameTree');
    const frameId = findFrameId(tree.frameTree, frame.url(), frame.name());
    if (frameId === null) {
      await session.detach().catch(() => undefined);
      throw new Error("the frame is not in its page's frame tree");
    }
    return new PageAgentWorld(page, session, frameId);
  }

  /** Runs `closer` when this world closes (the child frames' worlds it opened). */
  onClose(closer: () => Promise<void>): void {
    this.closers.push(closer);
  }

  /**
   * Calls `agent.<call>` in the current document's world and answers its value, injecting the
   * agent first where the document has none yet. A document that goes away mid-call rejects with
   * the DevTools message `isNavigationTeardown` recognises.
   *
   * The answer crosses as one JSON string: DevTools copies an object by value property
   * by property, which for a capture's 256 elements cost about a millisecond more than the
   * world's own `JSON.stringify` (unpatched, like every prototype there). The agent answers only
   * JSON values: plain objects, arrays, strings, finite numbers and booleans.
   */
  async call<T>(call: string): Promise<T> {
    const expression = `(async () => {
      const agent = globalThis[${JSON.stringify(PAGE_AGENT_GLOBAL)}];
      if (!agent) return '{"missing":true}';
      return JSON.stringify({ missing: false, value: await agent.${call} });
    })()`;
    const read = async () =>
      JSON.parse(await this.evaluate<string>(expression)) as { missing: boolean; value?: T };
    let answer = await read();
    if (answer.missing) {
      await this.evaluate(await pageAgentScript());
      answer = await read();
    }
    if (answer.missing) throw new Error('the page agent could not be injected into the document');
    return answer.value as T;
  }

  /**
   * Evaluates a self-contained expression in the agent's world (not through the agent): for the
   * platform's own short watches, such as the screenshot's mutation sentinel. Same rules as calls.
   */
  run<T>(expression: string): Promise<T> {
    return this.evaluate<T>(expression);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const closer of this.closers.splice(0)) await closer().catch(() => undefined);
    await this.session.detach().catch(() => undefined);
  }

  private async evaluate<T>(expression: string): Promise<T> {
    for (let attempt = 0; ; attempt += 1) {
      const contextId = await this.currentContext();
      let answer: Awaited<ReturnType<CDPSession['send']>> & {
        result: { value?: unknown };
        exceptionDetails?: { text: string; exception?: { description?: string } };
      };
      try {
        answer = await this.session.send('Runtime.evaluate', {
          expression,
          contextId,
          awaitPromise: true,
          returnByValue: true,
        });
      } catch (error) {
        // The cached context belonged to a document that is gone: the next one gets its own world.
        this.contextId = null;
        if (attempt === 0 && /Cannot find context with specified id/.test(String(error))) continue;
        throw error;
      }
      if (answer.exceptionDetails) {
        const detail = answer.exceptionDetails.exception?.description ?? answer.exceptionDetails.text;
        throw new Error(`the page agent failed: ${detail.split('\n')[0]}`);
      }
      return answer.result.value as T;
    }
  }

  private async currentContext(): Promise<number> {
    if (this.contextId === null) {
      const world = await this.session.send('Page.createIsolatedWorld', {
        frameId: this.mainFrameId,
        worldName: AGENT_WORLD_NAME,
      });
      this.contextId = world.executionContextId;
    }
    return this.contextId;
  }
}

interface FrameTreeNode {
  frame: { id: string; url: string; urlFragment?: string; name?: string };
  childFrames?: FrameTreeNode[];
}

function findFrameId(node: FrameTreeNode, url: string, name: string): string | null {
  for (const child of node.childFrames ?? []) {
    const childUrl = child.frame.url + (child.frame.urlFragment ?? '');
    if ((childUrl === url || child.frame.url === url) && (child.frame.name ?? '') === name)
      return child.frame.id;
    const inner = findFrameId(child, url, name);
    if (inner !== null) return inner;
  }
  return null;
}

/** A JSON literal for an agent call's argument list. */
export function literal(value: unknown): string {
  return JSON.stringify(value);
}
