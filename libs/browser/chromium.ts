import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { type Browser, chromium } from 'playwright-core';
import { StartupError } from '../shutdown/index.js';

/**
 * Chromium's headless shell (Debian's `chromium-headless-shell`): the same engine without the
 * desktop browser around it, the build Playwright itself runs for headless pages. A browser worker
 * launches no window, and the shell costs well under half the CPU of the full browser per launch
 * and per page (measured: 5 launches with 15 contexts, 5.0 s against 12.2 s of CPU), so a headless
 * launch prefers it. It cannot show a window: a headed launch never takes it.
 */
const HEADLESS_SHELL_NAME = 'chromium-headless-shell';
const SYSTEM_HEADLESS_SHELL_PATHS = [
  `/usr/lib/chromium/${HEADLESS_SHELL_NAME}`,
  `/usr/bin/${HEADLESS_SHELL_NAME}`,
];

/** Where a system Chromium usually lives, in the order we try them. */
const SYSTEM_CHROMIUM_PATHS = [
  '/usr/bin/chromium',
  '/usr/bin/chromium-browser',
  '/usr/bin/google-chrome-stable',
  '/usr/bin/google-chrome',
  '/snap/bin/chromium',
  '/Applications/Google Chrome.app/Contents/MacOS/Google Chrome',
  '/Applications/Chromium.app/Contents/MacOS/Chromium',
];
const SYSTEM_CHROMIUM_NAMES = ['chromium', 'chromium-browser', 'google-chrome-stable', 'google-chrome'];

/**
 * Flags every launch carries. Chromium as root needs `--no-sandbox`; without the background
 * switches it keeps opening connections (updates, sync, safe browsing) that a closed network refuses.
 */
export const CHROMIUM_ARGS: readonly string[] = [
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-default-apps',
  '--disable-quic',
  '--no-first-run',
  '--disable-gpu',
  '--disable-dev-shm-usage',
];

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export interface ChromiumLocation {
  path: string;
  source: 'BROWSER_EXECUTABLE' | 'playwright' | 'system';
}

/** The system's Chromium paths in the order they are tried: the headless shell first for a headless launch. */
export function systemChromiumPaths(headless: boolean): readonly string[] {
  return headless ? [...SYSTEM_HEADLESS_SHELL_PATHS, ...SYSTEM_CHROMIUM_PATHS] : SYSTEM_CHROMIUM_PATHS;
}

/**
 * The Chromium to launch: the configured one, else Playwright's own download, else the system's
 * (for a headless launch, its headless shell where installed).
 * Throws a one-line {@link StartupError} saying what to install when there is none.
 */
export function resolveChromium(
  configured: string | undefined,
  // biome-ignore lint/style/noProcessEnv: PATH is the system's own lookup, not a Leasehold setting.
  searchPath: string | undefined = process.env.PATH,
  options: { headless?: boolean } = {},
): ChromiumLocation {
  if (configured !== undefined) {
    if (isExecutable(configured)) return { path: configured, source: 'BROWSER_EXECUTABLE' };
    throw new StartupError(
      `BROWSER_EXECUTABLE is "${configured}", which is not an executable file; point it at Chromium or unset it`,
    );
  }
  let bundled: string | undefined;
  try {
    bundled = chromium.executablePath();
  } catch {
    bundled = undefined;
  }
  if (bundled && isExecutable(bundled)) return { path: bundled, source: 'playwright' };
  const headless = options.headless ?? true;
  for (const candidate of systemChromiumPaths(headless)) {
    if (isExecutable(candidate)) return { path: candidate, source: 'system' };
  }
  for (const folder of (searchPath ?? '').split(delimiter).filter(Boolean)) {
    for (const name of headless ? [HEADLESS_SHELL_NAME, ...SYSTEM_CHROMIUM_NAMES] : SYSTEM_CHROMIUM_NAMES) {
      const candidate = join(folder, name);
      if (isExecutable(candidate)) return { path: candidate, source: 'system' };
    }
  }
  throw new StartupError(
    'no Chromium found: install it (Debian/Ubuntu: `apt-get install chromium`) or set BROWSER_EXECUTABLE to its path',
  );
}

export interface LaunchOptions {
  executablePath: string;
  headless: boolean;
  /** Chromium's sandbox; unset: on unless running as root. */
  sandbox?: boolean | undefined;
  /** Extra switches after {@link CHROMIUM_ARGS}. */
  args?: readonly string[];
  /**
   * The egress proxy every request goes through (`http://127.0.0.1:PORT`; DESIGN §12). Playwright
   * then adds `--proxy-bypass-list=<-loopback>`, so loopback is proxied too, and WebRTC is kept
   * from sending UDP past it. Unset: Chromium reaches the network itself (engine-level tests).
   */
  proxyServer?: string | undefined;
}

/** With a proxy: WebRTC may use no UDP the proxy does not carry (it carries none). */
const PROXIED_ARGS: readonly string[] = ['--force-webrtc-ip-handling-policy=disable_non_proxied_udp'];

/** Launches Chromium with the flags this fleet needs (and `--no-sandbox` when running as root). */
export async function launchChromium(options: LaunchOptions): Promise<Browser> {
  const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  return chromium.launch({
    executablePath: options.executablePath,
    headless: options.headless,
    chromiumSandbox: options.sandbox ?? !asRoot,
    args: [...CHROMIUM_ARGS, ...(options.proxyServer ? PROXIED_ARGS : []), ...(options.args ?? [])],
    ...(options.proxyServer ? { proxy: { server: options.proxyServer } } : {}),
    // Leasehold stops its browser itself, in order, on SIGTERM.
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
  });
}
