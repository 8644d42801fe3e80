export {
  CHROMIUM_ARGS,
  type ChromiumLocation,
  type LaunchOptions,
  launchChromium,
  resolveChromium,
} from './chromium.js';
