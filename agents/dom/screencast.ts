// dom_plane video: CDP screencast frames (JPEG, sent only when the page repaints) of
// the active tab, written to ffmpeg at most `fps` times a second and encoded to WebM
// by core/recording.ts. The video has a variable frame rate: ffmpeg stamps each frame
// with the wall clock when it reads it, so a frame is written when the page changed,
// and while nothing changes only once a second (the video still runs as long as the
// session, and a seek to a moment of the session lands on what the page showed).
// Encoding a repeated frame cost as much as a new one: a static page cost `fps`
// frames a second, now one. The recorder follows the active tab, its cast paced to
// `fps` (active-cast.ts): Chromium copies and encodes only about the frames the video
// can keep, not one per repaint (PLANE_RECORD_PACED=0 for every repaint, as before).
import { Recording, recordingPaced } from '../core/recording.ts';
import type { Tabs } from './tabs.ts';
import { ActiveTabCast } from './active-cast.ts';

/** While the page shows the same picture, it is written again this often. */
const HEARTBEAT_MS = 1000;

export class ScreencastRecorder {
  private readonly cast: ActiveTabCast;
  private latest: Buffer | undefined;
  /** the frame last written, and when */
  private written: Buffer | undefined;
  private writtenAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly recording: Recording;

  constructor(
    tabs: Tabs,
    readonly file: string,
    private readonly fps: number,
    /** the video's frame size (core/recording.ts recordingSize): Chromium scales the screencast to it, so it encodes no more pixels than the video keeps */
    size: [number, number],
  ) {
    const [w, h] = size;
    const paceMs = recordingPaced() ? 1000 / fps : undefined;
    this.cast = new ActiveTabCast(tabs, { quality: 60, maxWidth: w, maxHeight: h, paceMs, onFrame: (jpeg: Buffer) => (this.latest = jpeg) });
    this.recording = new Recording(file, ['-use_wallclock_as_timestamps', '1', '-f', 'image2pipe', '-c:v', 'mjpeg', '-i', 'pipe:0', '-fps_mode', 'vfr', '-vf', `scale=${w}:${h}`], true);
  }

  start(): void {
    this.timer = setInterval(() => this.tick(), 1000 / this.fps);
    this.tick();
  }

  private tick(): void {
    void this.cast.sync();
    if (this.latest && (this.latest !== this.written || Date.now() - this.writtenAt >= HEARTBEAT_MS)) this.write(this.latest);
  }

  private write(frame: Buffer): void {
    this.written = frame;
    this.writtenAt = Date.now();
    this.recording.write(frame);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.cast.stop(true);
    // the last picture once more, stamped now: the video lasts until the session's end
    if (this.latest) this.write(this.latest);
    await this.recording.stop();
  }
}
