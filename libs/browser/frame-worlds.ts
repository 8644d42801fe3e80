import type { Frame } from 'playwright-core';
import { literal, PageAgentWorld } from './agent-call.js';
import type { Capture, CapturedElement, CaptureRequest, TargetPath } from './page-script/page-agent.js';
import { locatorAt } from './target-locator.js';

/**
 * Child frames of another origin (allowed, or in `frame_origins`; the fence keeps the
 * rest out) are observed and acted on through the page agent in each frame's own world. The main
 * frame's agent names where each such frame sits; this file captures the frames, inlines their
 * elements there and numbers the whole anew, and sends an act on a reference to the world that
 * holds it. One level only: a frame of another origin inside such a frame is left out.
 */

/** Where a reference of the merged observation lives: its world and the ref that world gave it. */
interface Route {
  world: PageAgentWorld;
  localRef: string;
  /** The `<iframe>`'s path in the page, prefixed to the path the frame's agent answers. */
  framePath: TargetPath | null;
}

interface Routes {
  revision: string;
  byRef: Map<string, Route>;
}

/** The frames' worlds of one page agent, and the routes of its latest capture. */
class FrameWorlds {
  private readonly worlds = new Map<Frame, Promise<PageAgentWorld>>();
  private routes: Routes | null = null;

  constructor(private readonly main: PageAgentWorld) {
    main.onClose(() => this.close());
  }

  /**
   * One capture of the page with its frames inlined: the main world's alone when it has no frame
   * of another origin (one round trip, as before). Otherwise every world is read from its start up
   * to the window's end, so the merged window is exact, and the bounds hold over the whole.
   */
  async capture(request: CaptureRequest): Promise<Capture> {
    this.routes = null;
    const first = await this.main.call<Capture>(`capture(${literal({ ...request, frameSlots: true })})`);
    if (!first.frames?.length) return first;
    const windowEnd = request.offset + request.windowSize;
    const whole =
      first.offset === 0 && first.elements.length >= Math.min(windowEnd, first.visibleSeen)
        ? first
        : await this.main.call<Capture>(
            `capture(${literal({ ...request, offset: 0, windowSize: windowEnd, frameSlots: true })})`,
          );
    const merged: { element: CapturedElement; route: Route }[] = [];
    let visibleSeen = whole.visibleSeen;
    let checked = whole.candidatesChecked;
    let limitReached = whole.candidateLimitReached;
    let textTruncated = whole.textTruncated;
    const texts = [whole.text];
    let nextMain = 0;
    const takeMain = (until: number) => {
      for (; nextMain < Math.min(until, whole.elements.length); nextMain += 1) {
        const element = whole.elements[nextMain] as CapturedElement;
        merged.push({ element, route: { world: this.main, localRef: element.ref, framePath: null } });
      }
    };
    for (const slot of whole.frames ?? []) {
      takeMain(slot.at);
      const remaining = request.candidateLimit - checked;
      if (remaining <= 0) {
        limitReached = true;
        break;
      }
      const world = await this.worldAt(slot.path);
      if (world === null) continue;
      const frameRequest: CaptureRequest = {
        ...request,
        offset: 0,
        windowSize: windowEnd,
        candidateLimit: remaining,
        frameSlots: false,
      };
      const inner = await world.call<Capture>(`capture(${literal(frameRequest)})`).catch(() => null);
      // A frame gone or moved mid-capture (a new process, say) is left out of this observation.
      if (inner === null) {
        this.forget(world);
        continue;
      }
      for (const element of inner.elements) {
        merged.push({ element, route: { world, localRef: element.ref, framePath: slot.path } });
      }
      visibleSeen += inner.visibleSeen;
      checked += inner.candidatesChecked;
      limitReached ||= inner.candidateLimitReached;
      textTruncated ||= inner.textTruncated;
      if (inner.text) texts.push(inner.text);
    }
    takeMain(whole.elements.length);
    const offset = Math.min(request.offset, visibleSeen);
    const byRef = new Map<string, Route>();
    const elements = merged.slice(offset, offset + request.windowSize).map(({ element, route }, index) => {
      const ref = `e${offset + index + 1}`;
      byRef.set(ref, route);
      return { ...element, ref };
    });
    this.routes = { revision: request.revision, byRef };
    const text = texts.join('\n');
    const { frames: _slots, ...page } = whole;
    return {
      ...page,
      text: text.slice(0, request.textLimit),
      textTruncated: textTruncated || text.length > request.textLimit,
      elements,
      offset,
      visibleSeen,
      candidatesChecked: checked,
      candidateLimitReached: limitReached,
    };
  }

  /**
   * The world holding `ref` of `revision` and the ref it knows it by; the main world's own when the
   * capture had no frame of another origin (or the revision is not the latest, which it refuses).
   */
  route(revision: string, ref: string): Route {
    const route = this.routes?.revision === revision ? this.routes.byRef.get(ref) : undefined;
    return route ?? { world: this.main, localRef: ref, framePath: null };
  }

  /** Forgets every world's references (a capture cut off by its deadline). */
  async invalidate(): Promise<void> {
    this.routes = null;
    const worlds = await Promise.all([...this.worlds.values()].map((world) => world.catch(() => null)));
    await Promise.all(
      [this.main, ...worlds].map((world) => world?.call<void>('invalidate()').catch(() => undefined)),
    );
  }

  private async close(): Promise<void> {
    const worlds = [...this.worlds.values()];
    this.worlds.clear();
    for (const world of worlds) await (await world.catch(() => null))?.close();
  }

  /** The world of the frame the `<iframe>` at `path` shows; null when it shows no allowed page. */
  private async worldAt(path: TargetPath): Promise<PageAgentWorld | null> {
    const page = this.main.page;
    const handle = await locatorAt(page, path)
      .elementHandle({ timeout: 1_000 })
      .catch(() => null);
    const frame = await handle?.contentFrame().catch(() => null);
    await handle?.dispose().catch(() => undefined);
    // A frame the fence blocked shows Chromium's error page: only fetched documents are read.
    if (!frame || !/^https?:/.test(frame.url())) return null;
    for (const [known, world] of this.worlds) if (known.isDetached()) this.dropWorld(known, world);
    let world = this.worlds.get(frame);
    if (!world) {
      world = PageAgentWorld.openInFrame(page, frame);
      this.worlds.set(frame, world);
    }
    return world.catch(() => {
      this.worlds.delete(frame);
      return null;
    });
  }

  private forget(world: PageAgentWorld): void {
    for (const [frame, known] of this.worlds) {
      void known.then((opened) => {
        if (opened === world && this.worlds.get(frame) === known) this.dropWorld(frame, known);
      });
    }
  }

  private dropWorld(frame: Frame, world: Promise<PageAgentWorld>): void {
    this.worlds.delete(frame);
    void world.then((opened) => opened.close()).catch(() => undefined);
  }
}

const byAgent = new WeakMap<PageAgentWorld, FrameWorlds>();

/** The frame worlds of a page's agent, made on first use and closed with it. */
export function frameWorldsOf(agent: PageAgentWorld): FrameWorlds {
  let worlds = byAgent.get(agent);
  if (!worlds) {
    worlds = new FrameWorlds(agent);
    byAgent.set(agent, worlds);
  }
  return worlds;
}

/** The path from the page of an element a frame's agent located within its own document. */
export function pathInPage(route: Route, inFrame: TargetPath): TargetPath {
  if (route.framePath === null) return inFrame;
  const outer = route.framePath;
  return { frames: [...outer.frames, outer.element, ...inFrame.frames], element: inFrame.element };
}
