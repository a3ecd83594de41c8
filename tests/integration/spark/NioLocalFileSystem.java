package parka.testing;

import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.local.LocalConfigKeys;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system for the tests' Spark JVMs, without a process per chmod and per
 * readlink (tests/integration/spark/_jars.py compiles it and puts it on their class path).
 *
 * <p>Without Hadoop's native library, which Spark's distribution lacks, RawLocalFileSystem runs
 * {@code chmod} as a process for every file and directory it creates with a permission, and
 * {@code readlink} for every link status a FileContext asks for (the renames of Spark's checkpoint
 * files and of delta-spark's commits). This one sets the permission with java.nio, and answers a
 * path that is no symbolic link with its status, as Hadoop's does (its readlink prints nothing for
 * such a path; given a path's URI, as Spark's paths are, it even reads a file name that does not
 * exist). A symbolic link, a mode with more than the permission bits, and everything else are
 * Hadoop's own. {@link Checksummed} stands in for {@code fs.file.impl}'s
 * LocalFileSystem and {@link Context} for {@code fs.AbstractFileSystem.file.impl}'s LocalFs.
 */
public class NioLocalFileSystem extends RawLocalFileSystem {

  @Override
  public void setPermission(Path p, FsPermission permission) throws IOException {
    short mode = permission.toShort();
    if ((mode & ~0777) != 0) {
      super.setPermission(p, permission);
      return;
    }
    Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(mode));
  }

  @Override
  public FileStatus getFileLinkStatus(Path f) throws IOException {
    File file = pathToFile(f);
    if (Files.isSymbolicLink(file.toPath())) {
      return super.getFileLinkStatus(f);
    }
    return getFileStatus(f);
  }

  static Set<PosixFilePermission> posix(short mode) {
    PosixFilePermission[] bits = {
      PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
      PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
    };
    Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
    for (int i = 0; i < bits.length; i++) {
      if ((mode & (1 << i)) != 0) {
        set.add(bits[i]);
      }
    }
    return set;
  }

  /** LocalFileSystem (checksum files beside the data) over this file system. */
  public static class Checksummed extends LocalFileSystem {
    public Checksummed() {
      super(new NioLocalFileSystem());
    }
  }

  /** RawLocalFs over this file system. */
  public static class RawContext extends DelegateToFileSystem {
    public RawContext(URI uri, Configuration conf) throws IOException, URISyntaxException {
      super(uri, new NioLocalFileSystem(), conf, "file", false);
    }

    @Override
    public int getUriDefaultPort() {
      return -1;
    }

    @Override
    public FsServerDefaults getServerDefaults(Path f) throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    @Deprecated
    public FsServerDefaults getServerDefaults() throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    public boolean isValidName(String src) {
      return true;
    }
  }

  /** LocalFs (checksum files beside the data) over this file system. */
  public static class Context extends ChecksumFs {
    public Context(URI uri, Configuration conf) throws IOException, URISyntaxException {
      super(new RawContext(uri, conf));
    }
  }
}
